# Sourced by tests/mpi_kill.sh, tests/mpi_ps_kill.sh and tests/mpi_ps_rerun.sh:
# one trial's kill.
#
#   kill_rank MPIRUN_PID RANK SEED [MAX_WAIT]
#
# Waits 1.5 .. 3 s (a pseudo-random moment drawn from SEED), finds the
# child of mpirun that is MPI rank RANK (OMPI_COMM_WORLD_RANK in its
# environment), SIGKILLs it and waits up to MAX_WAIT s (default 12) for the
# job to end, killing mpirun if it has not. Sets pid (the rank's process),
# secs (from the kill to the job's end, one decimal) and status (mpirun's
# exit status); returns 1, with mpirun stopped, when the rank is not found
# (the run ended early).
kill_rank() {
    _mp=$1 _rank=$2
    sleep "$(awk -v s="$3" 'BEGIN { srand(s); printf "%.2f", 1.5 + 1.5 * rand() }')"
    pid=""
    for _p in $(pgrep -P "$_mp"); do
        if tr '\0' '\n' < "/proc/$_p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$_rank"; then pid=$_p; fi
    done
    if [ -z "$pid" ]; then
        kill "$_mp" 2>/dev/null; wait "$_mp" 2>/dev/null
        return 1
    fi
    _t0=$(date +%s.%N)
    kill -9 "$pid"
    # the job must end within 10 s; past 12 (MAX_WAIT) it is killed and the trial fails
    _n=0 _max=$(( ${4:-12} * 10 ))
    while kill -0 "$_mp" 2>/dev/null && [ "$_n" -lt "$_max" ]; do sleep 0.1; _n=$((_n + 1)); done
    _t1=$(date +%s.%N)
    if kill -0 "$_mp" 2>/dev/null; then kill -9 "$_mp" 2>/dev/null; fi
    wait "$_mp" 2>/dev/null
    status=$?
    secs=$(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.1f", b - a }')
}
