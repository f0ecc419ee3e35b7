# host.sh - sourced by bench/auto.sh and bench/headline.sh: what about this host their
# numbers depend on that the run itself does not set (host_state, saved as
# OUTDIR/host.txt), and DAMON=off, which stops the kernel's DAMON monitor for the run.
#
# DAMON (kdamond threads, /sys/kernel/mm/damon) is how some VMs find cold memory to
# page out. On the 2-core development VM a kdamond with a pageout scheme ran in bursts
# of up to 8.8 ms, taking one of the two cores that 3 or 4 ranks share, and 4-12 % of a
# core while the sweeps ran; with it off, fewer reports stalled (BENCHMARKS.md, "Speed",
# 28c). The scripts leave it as they find it unless DAMON=off is set: then, as root,
# every kdamond that is on is turned off for the run and on again at exit.

host_state() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpus: $(nproc) ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo))"
  echo "kernel: $(uname -r)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  local k state pid line found=0 tck
  tck=$(getconf CLK_TCK)
  for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
    [[ -d $k ]] || continue
    found=1
    state=$(cat "$k/state" 2>/dev/null)
    pid=$(cat "$k/pid" 2>/dev/null)
    line="damon: kdamond ${k##*/} ${state:-?}"
    if [[ $state == on && $pid =~ ^[0-9]+$ && -r /proc/$pid/stat ]]; then
      # utime, stime and starttime are fields 14, 15 and 22 (the comm, kdamond.N, has no spaces)
      line+=$(awk -v t="$tck" -v u="$(cut -d' ' -f1 /proc/uptime)" \
        '{printf " (pid %d, up %.0f s, %.2f s of CPU)", $1, u - $22 / t, ($14 + $15) / t}' "/proc/$pid/stat")
      line+=" operations $(cat "$k/contexts/0/operations" 2>/dev/null), schemes $(cat "$k"/contexts/0/schemes/[0-9]*/action 2>/dev/null | paste -sd, -)"
    fi
    echo "$line"
  done
  ((found)) || echo "damon: no kdamond"
}

DAMON_STOPPED=()
damon_restore() {
  local k
  for k in "${DAMON_STOPPED[@]}"; do echo on > "$k/state" || echo "host.sh: could not turn $k back on" >&2; done
  DAMON_STOPPED=()
}
damon_off() {
  local k
  for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
    [[ -d $k && $(cat "$k/state" 2>/dev/null) == on ]] || continue
    if echo off > "$k/state"; then
      DAMON_STOPPED+=("$k")
    else
      echo "host.sh: DAMON=off: could not turn $k off (root?)" >&2; return 1
    fi
  done
  trap damon_restore EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  ((${#DAMON_STOPPED[@]})) && echo "host.sh: DAMON=off: stopped ${DAMON_STOPPED[*]} for this run" >&2
  return 0
}

# host_record OUTDIR: with DAMON=off, stops the monitor for the run (damon_off), then
# writes OUTDIR/host.txt.
host_record() {
  if [[ ${DAMON:-} == off ]]; then damon_off || return 1; fi
  host_state > "$1/host.txt"
}
