"""`dolsot mcp` against `python3 -c pass`, measured in the same run, interleaved.

    python bench/mcp/bench_mcp.py --cli build/cli/dolsot [--rounds 30] \
        [--sdk-python .venv/bin/python] [--markdown docs/bench/mcp.md]

Rows, each a median over rounds (one sample per round per row, the order of
the start-up rows rotated per round):
- start: spawn `dolsot mcp`, send `initialize`, read its answer (the server is
  then shut down, untimed);
- with --sdk-python: the same for a minimal stdio server written with the
  official Python SDK (`mcp.server.mcpserver.MCPServer`, one tool), what a
  Python implementation would pay at start;
- floor: `python3 -c pass`, spawn to exit;
- on one live server (started before timing, its session warmed by a first
  cell): a `run` round trip of "1+1" (request written to answer read) and a
  `ping` round trip (the protocol's own cost).
Ratios are against the floor of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

SDK_SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")

@server.tool()
def run(session: str, code: str) -> str:
    return code

server.run()
"""

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "0"}}}


class LineClient:
    """A raw newline-delimited JSON-RPC client over a child's pipes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        self.next_id = 1

    def call(self, message: dict) -> dict:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.proc.args} closed stdout")
        reply = json.loads(line)
        if "error" in reply:
            raise SystemExit(f"{self.proc.args}: {reply['error']}")
        return reply

    def request(self, method: str, params: dict | None = None) -> dict:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.next_id += 1
        return self.call(message)

    def close(self) -> None:
        self.proc.stdin.close()
        if self.proc.wait(timeout=30) != 0:
            raise SystemExit(f"{self.proc.args} exited {self.proc.returncode}")


def time_start(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    client = LineClient(argv, env, cwd)
    client.call(INITIALIZE)
    elapsed = time.perf_counter() - start
    client.close()
    return elapsed


def time_process(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True, help="the dolsot binary under test")
    parser.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                        else os.path.realpath(sys.executable),
                        help="the python3 of the floor (default: /usr/bin/python3)")
    parser.add_argument("--sdk-python", help="a python with mcp installed, for the SDK server row")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    cli = str(pathlib.Path(args.cli).resolve())
    if args.sdk_python:
        args.sdk_python = os.path.abspath(args.sdk_python)  # a venv's symlink: kept, not resolved

    work = pathlib.Path(tempfile.mkdtemp(prefix="dolsot-bench-mcp-"))
    (work / "sdk_server.py").write_text(SDK_SERVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
    env.update(DOLSOT_TYPECHECK="0", DOLSOT_CACHE_DIR=str(work / "cache"))

    starters = {"dolsot mcp: start to initialize answer": [cli, "mcp"]}
    if args.sdk_python:
        starters["Python SDK server: start to initialize answer"] = [args.sdk_python,
                                                                   str(work / "sdk_server.py")]
    samples: dict[str, list[float]] = {name: [] for name in starters}
    samples["python3 -c pass (floor)"] = []
    samples["run '1+1' round trip, live session"] = []
    samples["ping round trip"] = []

    live = LineClient([cli, "mcp"], env, str(work))
    live.call(INITIALIZE)
    run_params = {"name": "run", "arguments": {"session": "bench", "code": "1+1"}}
    live.request("tools/call", run_params)  # starts the worker and the session
    for round_number in range(args.rounds):
        order = list(starters.items())
        order = order[round_number % len(order):] + order[:round_number % len(order)]
        for name, argv in order:
            samples[name].append(time_start(argv, env, str(work)))
        samples["python3 -c pass (floor)"].append(time_process([args.python, "-c", "pass"], env))
        start = time.perf_counter()
        reply = live.request("tools/call", run_params)
        samples["run '1+1' round trip, live session"].append(time.perf_counter() - start)
        assert reply["result"]["structuredContent"]["value"] == "2", reply
        start = time.perf_counter()
        live.request("ping")
        samples["ping round trip"].append(time.perf_counter() - start)
    live.close()

    floor = statistics.median(samples["python3 -c pass (floor)"])
    lines = [f"{platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
             f"{args.rounds} rounds; floor: {args.python} -c pass", "",
             "| measurement | median | p90 | ratio to the floor |", "|---|---|---|---|"]
    for name, values in samples.items():
        values = sorted(values)
        median = statistics.median(values)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        lines.append(f"| {name} | {median * 1e3:.2f} ms | {p90 * 1e3:.2f} ms | "
                     f"{median / floor:.3f}x |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
