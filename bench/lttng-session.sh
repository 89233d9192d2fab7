# bench/lttng-session.sh: sourced by bench/run and bench/ir-per-record. An LTTng userspace
# session with bench_record's tracepoint (spanring_bench:span) enabled, so that the lttng_ust arm
# measures a tracepoint that records (without a session it is a load and a branch).
#
#   lttng_session_start NAME OUTDIR   0 when the session records; else 1, and lttng_note says why
#   lttng_session_stop                stops and destroys it, and stops a session daemon that
#                                     lttng_session_start started (by its pid, nothing else)
#
# Sets lttng_session (the name while it exists) and lttng_note (one sentence for the docs).
lttng_session=""
lttng_sessiond_pid=""
lttng_note="LTTng: not available (liblttng-ust-dev or lttng-tools missing); the lttng_ust arm is not measured."

lttng_session_start() {  # name outdir
  if ! command -v lttng >/dev/null || ! command -v lttng-sessiond >/dev/null; then
    return 1
  fi
  if ! lttng list >/dev/null 2>&1; then
    lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1 || true
    sleep 1
    lttng_sessiond_pid=$(cat /var/run/lttng/lttng-sessiond.pid 2>/dev/null || true)
  fi
  # A channel of 8 sub-buffers of 1 MiB per CPU, so that the consumer daemon keeps up and no
  # event is discarded (a discarded event is cheaper, as a dropped record is for spanring);
  # lttng_discarded reads the count back.
  if lttng create "$1" --output="$2" >/dev/null 2>&1 &&
     lttng enable-channel -u -s "$1" --subbuf-size 1M --num-subbuf 8 bench >/dev/null 2>&1 &&
     lttng enable-event -u 'spanring_bench:span' -s "$1" -c bench >/dev/null 2>&1 &&
     lttng start "$1" >/dev/null 2>&1; then
    lttng_session=$1
    lttng_note="LTTng: $(lttng --version 2>/dev/null | head -1); the lttng_ust arm ran inside an active userspace session \`$1\` (event \`spanring_bench:span\` enabled in a channel of 8 x 1 MiB sub-buffers per CPU, per-UID buffers, discard mode) recording to a temporary directory."
    return 0
  fi
  lttng destroy "$1" >/dev/null 2>&1 || true
  lttng_note="LTTng: the session could not be set up (lttng create/enable-event/start failed); the lttng_ust arm is not measured."
  return 1
}

lttng_discarded() {  # the session's discarded events so far ("?" when lttng does not say)
  lttng list "$lttng_session" 2>/dev/null |
    awk '/[Dd]iscarded events:/ { gsub(/[^0-9]/, "", $NF); n += $NF; seen = 1 }
         END { print seen ? n : "?" }'
}

lttng_session_stop() {
  if [ -n "$lttng_session" ]; then
    lttng stop "$lttng_session" >/dev/null 2>&1 || true
    lttng destroy "$lttng_session" >/dev/null 2>&1 || true
    lttng_session=""
  fi
  if [ -n "$lttng_sessiond_pid" ]; then
    kill "$lttng_sessiond_pid" 2>/dev/null || true
    lttng_sessiond_pid=""
  fi
}
