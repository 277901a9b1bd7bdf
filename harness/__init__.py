"""Load-test and regression harness for Apache RocketMQ POP consumption."""

__version__ = "0.1.0"
