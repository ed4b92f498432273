"""A Ray-distributed experiment runner for vLLM (README.md)."""
import time as _time

# When Python began running the runner (epoch seconds): the timeline's `launch` span starts here. Not the
# process's creation: `bash run.sh` execs Python after its set-up, and the process keeps the shell's start time.
STARTED_AT = _time.time()
