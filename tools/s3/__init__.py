"""A real S3-compatible server on this machine, started and stopped by the project: SeaweedFS (Apache-2.0),
built from the Go module proxy at a pinned version into the user cache, every port on 127.0.0.1."""
