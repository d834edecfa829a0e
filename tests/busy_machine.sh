#!/usr/bin/env bash
# The busy-machine check (issue 22, item 7): run the test suite with a CPU hog
# on every core beside it, as on a shared CI runner or a laptop compiling in
# the background. The suite must pass like this; a test that fails here but
# passes alone is asserting the machine's scheduling, not the code.
#
#   bash tests/busy_machine.sh                    # pytest tests -q -p no:cacheprovider
#   bash tests/busy_machine.sh tests/loadgen -x   # any pytest arguments instead
#   HOGS=4 bash tests/busy_machine.sh             # more hogs than cores
#   PYTEST=/path/to/venv/bin/pytest bash tests/busy_machine.sh
#
# The hogs are plain busy loops at normal priority, one per core (nproc) unless
# HOGS says otherwise. They are killed when the script ends, whatever way it ends
# (pass, failure, Ctrl-C, kill): the trap below runs on EXIT, INT and TERM. The
# exit status is pytest's.
set -uo pipefail
cd "$(dirname "$0")/.."

hogs="${HOGS:-$(nproc)}"
pytest_cmd="${PYTEST:-pytest}"
python_cmd="${PYTHON:-python3}"
hog_pids=()

stop_hogs() {
  if [ "${#hog_pids[@]}" -gt 0 ]; then
    kill "${hog_pids[@]}" 2>/dev/null
    wait "${hog_pids[@]}" 2>/dev/null
    hog_pids=()
  fi
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT
trap 'stop_hogs; exit 143' TERM

for _ in $(seq "$hogs"); do
  "$python_cmd" -c "while True: pass" &
  hog_pids+=("$!")
done
echo "busy_machine: ${hogs} CPU hog(s) running (pids ${hog_pids[*]}); load average $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$#" -eq 0 ]; then
  set -- tests -q -p no:cacheprovider
fi
start=$(date +%s)
"$pytest_cmd" "$@"
status=$?
end=$(date +%s)
stop_hogs
echo "busy_machine: pytest exit status ${status}, wall time $((end - start)) s with ${hogs} hog(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
