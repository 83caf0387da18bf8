"""`python -m bench <command> ...`: the benchmarks' command line (bench/cli.py)."""

from bench.cli import app

if __name__ == "__main__":
    app(prog_name="python -m bench")
