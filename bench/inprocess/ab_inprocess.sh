#!/usr/bin/env bash
# ab_inprocess.sh OLD_PYTHONPATH NEW_PYTHONPATH [RUNS] [BATCHES] [CELLS]
# Alternates bench_inprocess.py between two builds (old, new, old, new, ...),
# so load changes hit both alike, and prints every run's figures and the
# medians of the per-run medians and ratios. Extra environment:
#   PYTHON   interpreter (default: python3)
#   WRAP     a command prefix for every run, e.g. "taskset -c 0" (one CPU)
#   CODE     the cell (default: 1 + 1)
# Example: bench/inprocess/ab_inprocess.sh /tmp/base/python build/python 10 15 2000
set -euo pipefail
old="$1" new="$2" runs="${3:-10}" batches="${4:-15}" cells="${5:-2000}"
python="${PYTHON:-python3}"
code="${CODE:-1 + 1}"
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= runs; i++)); do
  for side in old new; do
    dir="$old"; [[ "$side" == new ]] && dir="$new"
    line="$(PYTHONPATH="$dir" ${WRAP:-} "$python" "$here/bench_inprocess.py" \
      --batches "$batches" --cells "$cells" --code "$code" |
      awk '/REPL step/ {p=$(NF-1)} /InProcessSession.run/ {o=$(NF-1)} END {printf "%s %s %.3f", p, o, o/p}')"
    load="$(cut -d' ' -f1 /proc/loadavg)"
    echo "$side $line $load" | tee -a "$out" |
      awk '{printf "run %-3s peer %7.2f us  ours %7.2f us  ratio %.2fx  load %s\n", $1, $2, $3, $4, $5}'
  done
done
for side in old new; do
  awk -v s="$side" '$1 == s {print $2, $3, $4}' "$out" | sort -n -k3 | awk -v s="$side" '
    {p[NR]=$1; o[NR]=$2; r[NR]=$3}
    END {
      m = int((NR + 1) / 2)
      printf "%s: median ratio %.2fx (range %.2f-%.2fx) over %d runs\n", s, r[m], r[1], r[NR], NR
    }'
done
