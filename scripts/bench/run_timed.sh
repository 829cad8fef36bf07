# Sourced by multi_gpu.sh and multi_gpu_big.sh. run NAME CMD...: runs CMD for at most $limit
# seconds (a hang fails its row, not the device call), its stdout (a JSON record) in
# $out/NAME.json and its stderr in $out/NAME.err, and says how it went.
run() {
  local name=$1; shift
  local t0=$SECONDS
  if timeout "$limit" "$@" > "$out/$name.json" 2> "$out/$name.err"; then
    echo "  $name: ok ($((SECONDS - t0)) s)"
  else
    echo "  $name: FAILED (exit $?, $((SECONDS - t0)) s): $(grep -v '^  ' "$out/$name.err" | tail -3 | cut -c1-300)"
  fi
}
