"""How every command ends (`rmq-harness`, the Spark jobs, the tools): what it returns, or a HarnessError as one
line (its detail below) and its exit code, or an interrupt (Ctrl-C, or SIGTERM while it runs) as one line and 130.
Printing is the caller's: each entry point passes a callable that says a line its own way (rich or plain)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from harness.core.errors import HarnessError

# What a shell reports for a command a Ctrl-C (SIGINT, 2) ended: 128 + 2.
EXIT_INTERRUPTED = 130

# What a line says, for the caller's printer: an error's message, the lines below it, an interrupt.
ERROR, DETAIL, INTERRUPTED = "error", "detail", "interrupted"
Say = Callable[[str, str], None]  # say(what, text); what: ERROR, DETAIL or INTERRUPTED


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into an exception so cleanup (stopping half-started brokers) runs as for Ctrl-C.
    raise KeyboardInterrupt


def exit_code_of(command: Callable[[], int], say: Say, interrupted: str = "interrupted") -> int:
    """``command()``'s exit code; a HarnessError said (``say(ERROR, message)``, then its detail) and its exit code;
    a KeyboardInterrupt (SIGTERM is one while the command runs) ``say(INTERRUPTED, interrupted)`` and 130.
    Anything else (argparse's SystemExit among them) passes through."""
    # Signal handlers can only be set on the main thread (where signals are delivered).
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    try:
        return command()
    except HarnessError as e:
        say(ERROR, str(e))
        if e.detail:
            say(DETAIL, e.detail)
        return e.exit_code
    except KeyboardInterrupt:
        say(INTERRUPTED, interrupted)
        return EXIT_INTERRUPTED
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
