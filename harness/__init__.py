"""The process harness: private servers (Redis, PostgreSQL, OpenSearch), Celery workers, the app
served by uvicorn on a real socket, and local stand-ins for outside provider APIs.

The tests, the benchmarks (`bench/`) and `make cluster` start the same pieces from here, so each
server has one way to start. Not part of the installed product.
"""
