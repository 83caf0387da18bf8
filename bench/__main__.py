"""`python -m bench <command> ...`: the same commands as `vibe-semantic bench <command> ...`
(services/cli.py's `bench` group), for a checkout whose venv has no console script on PATH."""

from services.cli import bench_app

if __name__ == "__main__":
    bench_app(prog_name="python -m bench")
