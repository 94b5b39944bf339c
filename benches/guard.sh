#!/usr/bin/env bash
# The guard beside HAProxy (docs/BENCHMARKS.md, "The guard beside HAProxy";
# issue 16): `stormbreak guard` and HAProxy measured in the same run on
#
#   passthrough   closed-loop saturation (wrk): rps, the proxy's CPU-seconds
#                 per 1 000 requests, rps per proxy CPU-second, p50/p99 — the
#                 guard with every policy on but none binding (on the
#                 default listener, which detects HTTP/1.1 or h2c by the
#                 preface, and on an HTTP/1.1-only one), the guard with
#                 none, HAProxy, and a bare hyper forwarder (the overhead
#                 baseline), plus the backend alone;
#   post          passthrough with a 4 KiB POST body (wrk -s post.lua): the
#                 every-policy guard (which buffers a retryable body),
#                 HAProxy and the bare forwarder;
#   h2c           passthrough over HTTP/2 without TLS (h2load, 10 connections
#                 of 5 streams each, closed loop): the every-policy guard's
#                 default listener (h2c by preface) against HAProxy's
#                 `proto h2` bind, both speaking HTTP/1.1 to the backend;
#   tls           passthrough over TLS 1.3 (wrk over https, kept
#                 connections): the every-policy guard (rustls, ring) against
#                 HAProxy (OpenSSL) with the same ECDSA P-256 certificate
#                 and the same cipher suite and key exchange (checked with
#                 openssl s_client and written to meta.txt);
#   threads       the every-policy guard with 1 and with 2 worker threads,
#                 proxy, backend and load generator sharing both cores:
#                 requests per proxy CPU-second of each (issue 43, item 4);
#   overload      open loop (oha, coordinated-omission corrected) at 3× the
#                 backend's capacity: goodput as a share of capacity, p99 of
#                 the admitted (2xx) requests against the unloaded p99 — the
#                 guard (fixed limit + queue; and Gradient2 + queue), HAProxy
#                 with maxconn/maxqueue, HAProxy with no limit;
#   storm         open loop against a backend answering 503 always: attempts
#                 reaching the backend per request (the backend counts them),
#                 the guard's retry budget (alone, and with its breaker)
#                 against HAProxy's `retries 3`;
#   idle          memory per idle keep-alive connection (RSS delta / count);
#   burst         memory after bursts of connections (issue 37): RSS after
#                 each of --burst-rounds rounds of --burst-conns keep-alive
#                 connections opened at once, one request each, then all
#                 closed (benches/guard/burst.py) — the bare forwarder, the
#                 guard, the guard with MALLOC_ARENA_MAX=1 (one glibc malloc
#                 arena) and HAProxy;
#   soak          the guard at 10× capacity for --soak-minutes: RSS every 10 s,
#                 its least-squares slope after warm-up, every request answered.
#
# Method: the proxy under test runs alone on CPU 1 (taskset -c 1; the guard and
# the forwarder with TOKIO_WORKER_THREADS=1, HAProxy with nbthread 1); the
# backend and the load generator share CPU 0. The backend's capacity is
# workers × 1/service time, the service time a sleep (benches/guard/backend),
# measured directly at the start of the run. CPU is utime + stime of the proxy
# process from /proc/PID/stat around each measured load run. Every figure is
# the median of --reps runs with its min–max spread. Loopback only, ports
# picked free; every process started here is ended by a trap on exit; every
# load run is bounded in count and duration (and by `timeout`).
#
# usage: benches/guard.sh [--quick] [--reps N] [--out DIR] [--soak-minutes M]
#                         [--burst-conns N] [--burst-rounds R]
#                         [--skip-install] [--only PARTS] [--guard-before BIN]
#   --quick           short runs (seconds, not tens of seconds; a 1-minute
#                     soak; 1 rep unless --reps), so the whole script takes a
#                     few minutes
#   --reps N          repetitions of every figure [default: 3, --quick: 1]
#   --out DIR         raw outputs and tables.md [default: a new /tmp/stormbreak-guardbench.*]
#   --soak-minutes M  soak length [default: 10, --quick: 1]
#   --burst-conns N   connections of each burst, at most 8000 (the proxies'
#                     connection limit) [default: 5000, --quick: 1000]
#   --burst-rounds R  bursts per proxy [default: 6, --quick: 3]
#   --skip-install    do not apt-get/cargo install missing tools (fail instead)
#   --only LIST       run only these parts, comma-separated, of: passthrough,
#                     post, h2c, tls, threads, idle, burst, overload, storm,
#                     soak [default: all]
#   --guard-before BIN  also run the every-policy guard of passthrough, idle
#                     and burst with another build of `stormbreak` (an earlier
#                     commit's), in the same run: a change's before and
#                     after side by side
#
# Needs (installed when missing): haproxy, wrk (apt), h2load (apt
# nghttp2-client; only for h2c), openssl (only for tls), oha (cargo install
# oha --locked; only for overload, storm and soak), taskset (util-linux),
# python3, curl. Honours CARGO_TARGET_DIR
# (the backend builds in "$CARGO_TARGET_DIR/guard-backend", a missing oha
# in "$CARGO_TARGET_DIR/guard-tools"). Never asserts a timing; prints Markdown tables,
# also saved as OUT/tables.md, and OUT/results.jsonl (one line per run).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
B="$HERE/guard"
QUICK=0
REPS=""
OUT=""
SOAK_MIN=""
BURST_CONNS=""
BURST_ROUNDS=""
INSTALL=1
BIN_BEFORE=""
ONLY=",passthrough,post,h2c,tls,threads,idle,burst,overload,storm,soak,"
while (($#)); do
    case "$1" in
        --quick) QUICK=1; shift ;;
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --soak-minutes) SOAK_MIN=$2; shift 2 ;;
        --burst-conns) BURST_CONNS=$2; shift 2 ;;
        --burst-rounds) BURST_ROUNDS=$2; shift 2 ;;
        --skip-install) INSTALL=0; shift ;;
        --only) ONLY=",$2,"; shift 2 ;;
        --guard-before) BIN_BEFORE=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "guard.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if ((QUICK)); then
    REPS=${REPS:-1}; SOAK_MIN=${SOAK_MIN:-1}
    BURST_CONNS=${BURST_CONNS:-1000}; BURST_ROUNDS=${BURST_ROUNDS:-3}
    PT_DUR=4; OL_DUR=5; STORM_DUR=4; IDLE_CONNS=2000; WARM=1
else
    REPS=${REPS:-3}; SOAK_MIN=${SOAK_MIN:-10}
    BURST_CONNS=${BURST_CONNS:-5000}; BURST_ROUNDS=${BURST_ROUNDS:-6}
    PT_DUR=10; OL_DUR=15; STORM_DUR=10; IDLE_CONNS=2000; WARM=2
fi
[[ $REPS =~ ^[1-9][0-9]?$ ]] || { echo "guard.sh: --reps must be 1..99" >&2; exit 2; }
want() { [[ $ONLY == *",$1,"* ]]; }
[[ -z $BIN_BEFORE || -x $BIN_BEFORE ]] || { echo "guard.sh: --guard-before: $BIN_BEFORE is not an executable file" >&2; exit 2; }
[[ $SOAK_MIN =~ ^[1-9][0-9]?$ ]] || { echo "guard.sh: --soak-minutes must be 1..99" >&2; exit 2; }
# At most the proxies' own connection limit (maxconn / max_connections 8000 in the configs).
[[ $BURST_CONNS =~ ^[1-9][0-9]{0,3}$ ]] && ((BURST_CONNS <= 8000)) || { echo "guard.sh: --burst-conns must be 1..8000" >&2; exit 2; }
[[ $BURST_ROUNDS =~ ^[1-9][0-9]?$ ]] || { echo "guard.sh: --burst-rounds must be 1..99" >&2; exit 2; }

# The backend of the overload, storm and soak runs: WORKERS at once, each
# request SLEEP_MS long, so nominally WORKERS × 1000 / SLEEP_MS requests/s.
WORKERS=10
SLEEP_MS=10
# The overload runs' limits, the same for the guard and HAProxy: LIMIT at
# the backend at once (its workers + half as many again, for the round trip
# between two requests on one worker; exactly WORKERS leaves workers idle
# while the next request travels), QSIZE queued, each at most QTIMEOUT (one
# service time) in the queue.
LIMIT=$((WORKERS * 3 / 2))
QSIZE=$WORKERS
QTIMEOUT=${SLEEP_MS}ms
PT_CONNS=50          # wrk connections for passthrough (as issue 16's HAProxy figure)
OL_CONNS=300         # oha connections for the open-loop runs
STORM_RATE=1000      # requests/s against the failing backend
PROXY_CPU=1
LOAD_CPU=0

OUT=${OUT:-$(mktemp -d /tmp/stormbreak-guardbench.XXXXXX)}
mkdir -p "$OUT/raw" "$OUT/logs" "$OUT/conf"
OUT=$(realpath "$OUT")
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"
log() { echo "== $*" >&2; }

# ---- processes: every one started is ended on exit ----------------------
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# stop PID: TERM, up to 5 s, then KILL; drops it from PIDS.
stop() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local keep=() p
    for p in "${PIDS[@]}"; do [[ $p = "$pid" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT PID: until 127.0.0.1:PORT accepts (10 s at most) while PID lives.
wait_port() {
    local port=$1 pid=$2 i
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || { echo "guard.sh: process $pid died (see $OUT/logs)" >&2; return 1; }
        (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "guard.sh: nothing listens on $port after 10 s" >&2
    return 1
}

# spawn NAME CPU CMD...: start CMD pinned to CPU, output in OUT/logs/NAME.log; sets SPAWNED.
spawn() {
    local name=$1 cpu=$2
    shift 2
    taskset -c "$cpu" "$@" >"$OUT/logs/$name.log" 2>&1 &
    SPAWNED=$!
    PIDS+=("$SPAWNED")
}

cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
CLK_TCK=$(getconf CLK_TCK)
# cpu_json TICKS0 TICKS1 WALL0 WALL1: {"cpu_s", "wall_s"} (cpu_s null without ticks).
cpu_json() {
    awk -v t0="$1" -v t1="$2" -v w0="$3" -v w1="$4" -v hz="$CLK_TCK" 'BEGIN {
        printf "{\"cpu_s\": %s, \"wall_s\": %.4f}\n", (t0 == "" ? "null" : sprintf("%.3f", (t1 - t0) / hz)), w1 - w0 }'
}

# fill TEMPLATE OUTFILE PORT BACKEND [ADMIN]: a config with its @X@ filled in.
fill() {
    sed -e "s/@PORT@/$3/g; s/@BACKEND@/$4/g; s/@ADMIN@/${5:-0}/g" \
        -e "s/@WORKERS@/$WORKERS/g; s/@LIMIT@/$LIMIT/g; s/@QSIZE@/$QSIZE/g; s/@QTIMEOUT@/$QTIMEOUT/g" "$1" >"$2"
}

# ---- tools -----------------------------------------------------------
TD=${CARGO_TARGET_DIR:-$REPO/target}
[[ $TD = /* ]] || TD="$REPO/$TD"
need_apt=()
command -v haproxy >/dev/null || need_apt+=(haproxy)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v taskset >/dev/null || need_apt+=(util-linux)
command -v curl >/dev/null || need_apt+=(curl)
want h2c && ! command -v h2load >/dev/null && need_apt+=(nghttp2-client)
want tls && ! command -v openssl >/dev/null && need_apt+=(openssl)
if ((${#need_apt[@]})); then
    ((INSTALL)) || { echo "guard.sh: missing ${need_apt[*]} (no --skip-install to install)" >&2; exit 1; }
    log "apt-get install ${need_apt[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi
OHA=$(command -v oha || true)
[[ -n $OHA ]] || { [[ -x $TD/guard-tools/bin/oha ]] && OHA=$TD/guard-tools/bin/oha; }
if [[ -z $OHA ]] && { want overload || want storm || want soak; }; then
    ((INSTALL)) || { echo "guard.sh: missing oha (cargo install oha --locked)" >&2; exit 1; }
    log "cargo install oha --locked (once; into $TD/guard-tools)"
    CARGO_TARGET_DIR="$TD/guard-tools/build" cargo install oha --locked --root "$TD/guard-tools" >&2
    OHA=$TD/guard-tools/bin/oha
fi
# 2 000 idle connections or a burst of up to 8 000, their upstream side and
# the load's connections.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# ---- build -----------------------------------------------------------
DESC="$(git -C "$REPO" rev-parse --short HEAD)"
[[ -z $(git -C "$REPO" status --porcelain -- crates Cargo.toml Cargo.lock benches/guard) ]] || DESC="$DESC+uncommitted"
log "building stormbreak (release) at $DESC"
(cd "$REPO" && cargo build --release --locked -p stormbreak --bin stormbreak >&2)
cp "$TD/release/stormbreak" "$OUT/stormbreak"
log "building benches/guard/backend (release)"
CARGO_TARGET_DIR="$TD/guard-backend" cargo build --release --locked --manifest-path "$B/backend/Cargo.toml" >&2
cp "$TD/guard-backend/release/guard-backend" "$TD/guard-backend/release/guard-forward" "$OUT/"
BIN_GUARD=$OUT/stormbreak
BIN_BACKEND=$OUT/guard-backend
BIN_FORWARD=$OUT/guard-forward

{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $DESC"
    [[ -z $BIN_BEFORE ]] || echo "guard-before: $BIN_BEFORE ($("$BIN_BEFORE" --version 2>/dev/null || echo "no --version"))"
    echo "command: benches/guard.sh$([[ $QUICK = 1 ]] && echo " --quick") --reps $REPS --soak-minutes $SOAK_MIN$(want burst && echo " --burst-conns $BURST_CONNS --burst-rounds $BURST_ROUNDS") --only ${ONLY:1:-1}"
    echo "haproxy: $(haproxy -v | head -1)"
    echo "wrk: $(wrk -v 2>&1 | head -1)"
    echo "oha: $([[ -n $OHA ]] && "$OHA" --version || echo "not used")"
    echo "kernel: $(uname -r); cpus: $(nproc)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/meta.txt"
# Time the hypervisor gave each CPU to others (the 8th field of /proc/stat):
# a shared host can slow every proxy alike even when this machine is idle.
steal() { awk '/^cpu[0-9]/ { printf "%s %s ", $1, $9 }' /proc/stat; }
STEAL0=$(steal) STEAL_T0=$(date +%s)
cat "$OUT/meta.txt" >&2

# ---- the proxies -------------------------------------------------------
# start_proxy KIND CONFIG-TEMPLATE BACKEND-PORT: sets PROXY_PID, PROXY_PORT, ADMIN_PORT.
# A guard KIND ending in -arena1 runs with MALLOC_ARENA_MAX=1 (glibc: one malloc arena).
start_proxy() {
    local kind=$1 tmpl=$2 backend=$3 conf extra=()
    PROXY_PORT=$(free_port)
    ADMIN_PORT=$(free_port)
    case $kind in
        guard*)
            [[ $kind != *-arena1 ]] || extra=(MALLOC_ARENA_MAX=1)
            conf="$OUT/conf/$kind.toml"
            fill "$tmpl" "$conf" "$PROXY_PORT" "$backend" "$ADMIN_PORT"
            # The HTTP/1.1-only listener: the same config, no protocol detection.
            [[ $kind != guard-h1 ]] || sed -i '0,/^name = "edge"$/s//name = "edge"\nprotocol = "http1"/' "$conf"
            [[ $kind != guard-tls ]] || sed -i "0,/^name = \"edge\"\$/s||name = \"edge\"\ntls = { cert = \"$TLS_DIR/cert.pem\", key = \"$TLS_DIR/key.pem\" }|" "$conf"
            local bin=$BIN_GUARD cpu=$PROXY_CPU threads=1
            [[ $kind != guard-before ]] || bin=$BIN_BEFORE
            # The threads part: both cores, shared with the backend and wrk.
            case $kind in guard-t1) cpu=0,1 ;; guard-t2) cpu=0,1 threads=2 ;; esac
            "$bin" guard --check "$conf" >/dev/null
            spawn "$kind" "$cpu" env TOKIO_WORKER_THREADS=$threads "${extra[@]}" "$bin" guard --config "$conf" --drain-timeout 1s
            ;;
        haproxy*)
            conf="$OUT/conf/$kind.cfg"
            fill "$tmpl" "$conf" "$PROXY_PORT" "$backend"
            # The protocol parts: HTTP/2 by prior knowledge, or TLS 1.3 with
            # the guard's certificate, cipher suite and ALPN.
            case $kind in
                haproxy-h2c) sed -i "s|^\( *bind 127.0.0.1:$PROXY_PORT\)\$|\1 proto h2|" "$conf" ;;
                haproxy-tls) sed -i "s|^\( *bind 127.0.0.1:$PROXY_PORT\)\$|\1 ssl crt $TLS_DIR/haproxy.pem ssl-min-ver TLSv1.3 ciphersuites $TLS_SUITE alpn http/1.1|" "$conf" ;;
            esac
            haproxy -c -q -f "$conf"
            spawn "$kind" "$PROXY_CPU" haproxy -db -f "$conf"
            ;;
        forward)
            spawn forward "$PROXY_CPU" env TOKIO_WORKER_THREADS=1 "$BIN_FORWARD" --port "$PROXY_PORT" --upstream "127.0.0.1:$backend"
            ;;
        direct) PROXY_PID=""; PROXY_PORT=$backend; return 0 ;;
        *) echo "guard.sh: unknown proxy $kind" >&2; exit 1 ;;
    esac
    PROXY_PID=$SPAWNED
    wait_port "$PROXY_PORT" "$PROXY_PID"
}

# start_backend NAME ARGS...: sets BACKEND_PID, BACKEND_PORT.
start_backend() {
    local name=$1
    shift
    BACKEND_PORT=$(free_port)
    spawn "backend-$name" "$LOAD_CPU" "$BIN_BACKEND" --port "$BACKEND_PORT" "$@"
    BACKEND_PID=$SPAWNED
    wait_port "$BACKEND_PORT" "$BACKEND_PID"
}

backend_count() { curl -fsS "http://127.0.0.1:$BACKEND_PORT/count"; }

# record JSON-FIELDS...: one line of results.jsonl.
record() { python3 "$B/report.py" record "$@" >>"$RESULTS"; }

# Extra wrk arguments (the post part's script); none by default.
WRK_ARGS=()
# The tls part's scheme.
SCHEME=http
# wrk_run TAG PORT DURATION: closed loop, CPU of the proxy around it.
wrk_run() {
    local tag=$1 port=$2 dur=$3 t0 t1 w0 w1
    [[ -z $PROXY_PID ]] || t0=$(cpu_ticks "$PROXY_PID")
    w0=$(date +%s.%N)
    timeout $((dur + 30)) taskset -c "$LOAD_CPU" wrk -t1 -c"$PT_CONNS" -d"${dur}s" --latency "${WRK_ARGS[@]}" \
        "$SCHEME://127.0.0.1:$port/" >"$OUT/raw/$tag.wrk"
    w1=$(date +%s.%N)
    if [[ -n $PROXY_PID ]]; then
        t1=$(cpu_ticks "$PROXY_PID")
        cpu_json "$t0" "$t1" "$w0" "$w1" >"$OUT/raw/$tag.cpu"
    else
        cpu_json "" "" "$w0" "$w1" >"$OUT/raw/$tag.cpu"
    fi
}

# h2load_run TAG PORT DURATION: closed loop over h2c (10 connections × 5
# streams = wrk's 50 requests in flight), CPU of the proxy around it.
H2_CONNS=10
H2_STREAMS=5
h2load_run() {
    local tag=$1 port=$2 dur=$3 t0 t1 w0 w1
    t0=$(cpu_ticks "$PROXY_PID")
    w0=$(date +%s.%N)
    timeout $((dur + 30)) taskset -c "$LOAD_CPU" h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -D"$dur" \
        "http://127.0.0.1:$port/" >"$OUT/raw/$tag.h2load"
    w1=$(date +%s.%N)
    t1=$(cpu_ticks "$PROXY_PID")
    cpu_json "$t0" "$t1" "$w0" "$w1" >"$OUT/raw/$tag.cpu"
}

# oha_run TAG PORT RATE COUNT TIMEOUT: open loop at RATE, COUNT requests,
# latencies from each request's scheduled start (coordinated-omission
# corrected), percentiles of the 2xx answers apart; the proxy's CPU around it.
oha_run() {
    local tag=$1 port=$2 rate=$3 count=$4 tmo=$5 t0="" t1 w0 w1
    [[ -z $PROXY_PID ]] || t0=$(cpu_ticks "$PROXY_PID")
    w0=$(date +%s.%N)
    # Hard bound: the count at the rate, 4× over, plus 60 s.
    timeout $((count / rate * 4 + 60)) taskset -c "$LOAD_CPU" "$OHA" --no-tui --output-format json \
        -n "$count" -q "$rate" --latency-correction --stats-success-breakdown -c "$OL_CONNS" -t "$tmo" \
        "http://127.0.0.1:$port/" >"$OUT/raw/$tag.oha.json"
    w1=$(date +%s.%N)
    if [[ -n $PROXY_PID ]]; then
        t1=$(cpu_ticks "$PROXY_PID")
        cpu_json "$t0" "$t1" "$w0" "$w1" >"$OUT/raw/$tag.cpu"
    else
        cpu_json "" "" "$w0" "$w1" >"$OUT/raw/$tag.cpu"
    fi
}

# Each part's config templates, by proxy.
declare -A TMPL=(
    [guard]="$B/guard-passthrough.toml" [guard-minimal]="$B/guard-minimal.toml"
    [guard-arena1]="$B/guard-passthrough.toml" [guard-before]="$B/guard-passthrough.toml"
    [guard-h1]="$B/guard-passthrough.toml" [guard-h2c]="$B/guard-passthrough.toml"
    [guard-tls]="$B/guard-passthrough.toml" [haproxy-h2c]="$B/haproxy-passthrough.cfg"
    [haproxy-tls]="$B/haproxy-passthrough.cfg" [guard-t1]="$B/guard-passthrough.toml" [guard-t2]="$B/guard-passthrough.toml"
    [haproxy]="$B/haproxy-passthrough.cfg" [forward]="" [direct]=""
)

# ---- 0. the backend's capacity --------------------------------------------
log "backend capacity: $WORKERS workers × ${SLEEP_MS} ms"
start_backend cap --workers "$WORKERS" --sleep-ms "$SLEEP_MS"
PROXY_PID=""
PT_CONNS_SAVED=$PT_CONNS
# Closed loop with 8 connections per worker, so every worker is always busy.
PT_CONNS=$((WORKERS * 8))
wrk_run capacity "$BACKEND_PORT" "$OL_DUR"
PT_CONNS=$PT_CONNS_SAVED
CAPACITY=$(python3 "$B/report.py" wrk-rps "$OUT/raw/capacity.wrk")
record figure=capacity rps="$CAPACITY" nominal=$((WORKERS * 1000 / SLEEP_MS))
stop "$BACKEND_PID"
log "measured capacity $CAPACITY requests/s (nominal $((WORKERS * 1000 / SLEEP_MS)))"
CAP_INT=$(printf '%.0f' "$CAPACITY")

# ---- 1. passthrough -----------------------------------------------------------
# ---- the tls part's certificate: one ECDSA P-256 key for both proxies ---------
TLS_DIR=$OUT/conf/tls
# TLS 1.3's AES-256-GCM: OpenSSL's first choice as a client (wrk) and a
# server, and rustls' (which follows the client's order); set on HAProxy,
# checked on both.
TLS_SUITE=TLS_AES_256_GCM_SHA384
if want tls; then
    mkdir -p "$TLS_DIR"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" 2>/dev/null
    cat "$TLS_DIR/cert.pem" "$TLS_DIR/key.pem" >"$TLS_DIR/haproxy.pem"
fi
# tls_params PORT: the cipher suite and key exchange a TLS 1.3 client gets.
tls_params() {
    timeout 10 openssl s_client -connect "127.0.0.1:$1" -tls1_3 </dev/null 2>/dev/null |
        awk '/^New, TLS/ {c = $NF} /Server Temp Key/ {sub(/^.*Temp Key: /, ""); k = $0} END {print c ", " k}'
}

if want passthrough || want post || want h2c || want tls || want threads || want idle || want burst; then
start_backend pass
PT_KINDS=(direct forward guard-minimal guard guard-h1 haproxy)
[[ -z $BIN_BEFORE ]] || PT_KINDS=(direct forward guard-minimal guard-before guard guard-h1 haproxy)
for rep in $(seq "$REPS"); do
    want passthrough || break
    for kind in "${PT_KINDS[@]}"; do
        log "[$rep/$REPS] passthrough $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        # Warm-up: connections, pools, caches.
        taskset -c "$LOAD_CPU" wrk -t1 -c"$PT_CONNS" -d"${WARM}s" "http://127.0.0.1:$PROXY_PORT/" >/dev/null
        wrk_run "pass-$kind-$rep" "$PROXY_PORT" "$PT_DUR"
        record figure=passthrough proxy="$kind" rep="$rep" \
            wrk="$OUT/raw/pass-$kind-$rep.wrk" cpu="$OUT/raw/pass-$kind-$rep.cpu"
        [[ -z $PROXY_PID ]] || stop "$PROXY_PID"
    done
done

# ---- 1a. POST with a 4 KiB body (issue 43, item 5) ------------------------------
for rep in $(seq "$REPS"); do
    want post || break
    WRK_ARGS=(-s "$B/post.lua")
    for kind in forward guard haproxy; do
        log "[$rep/$REPS] post 4 KiB $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        taskset -c "$LOAD_CPU" wrk -t1 -c"$PT_CONNS" -d"${WARM}s" "${WRK_ARGS[@]}" "http://127.0.0.1:$PROXY_PORT/" >/dev/null
        wrk_run "post-$kind-$rep" "$PROXY_PORT" "$PT_DUR"
        record figure=post proxy="$kind" rep="$rep" \
            wrk="$OUT/raw/post-$kind-$rep.wrk" cpu="$OUT/raw/post-$kind-$rep.cpu"
        stop "$PROXY_PID"
    done
    WRK_ARGS=()
done

# ---- 1b. h2c and TLS (issue 43, item 5) ---------------------------------------
for rep in $(seq "$REPS"); do
    want h2c || break
    for kind in guard-h2c haproxy-h2c; do
        log "[$rep/$REPS] h2c $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        taskset -c "$LOAD_CPU" h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -D"$WARM" "http://127.0.0.1:$PROXY_PORT/" >/dev/null
        h2load_run "h2c-$kind-$rep" "$PROXY_PORT" "$PT_DUR"
        record figure=h2c proxy="${kind%-h2c}" rep="$rep" \
            h2load="$OUT/raw/h2c-$kind-$rep.h2load" cpu="$OUT/raw/h2c-$kind-$rep.cpu"
        stop "$PROXY_PID"
    done
done
for rep in $(seq "$REPS"); do
    want tls || break
    SCHEME=https
    for kind in guard-tls haproxy-tls; do
        log "[$rep/$REPS] tls $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        ((rep > 1)) || echo "tls $kind: $(tls_params "$PROXY_PORT")" >>"$OUT/meta.txt"
        taskset -c "$LOAD_CPU" wrk -t1 -c"$PT_CONNS" -d"${WARM}s" "https://127.0.0.1:$PROXY_PORT/" >/dev/null
        wrk_run "tls-$kind-$rep" "$PROXY_PORT" "$PT_DUR"
        record figure=tls proxy="${kind%-tls}" rep="$rep" \
            wrk="$OUT/raw/tls-$kind-$rep.wrk" cpu="$OUT/raw/tls-$kind-$rep.cpu"
        stop "$PROXY_PID"
    done
    SCHEME=http
done

# ---- 1c. worker threads (issue 43, item 4) ----------------------------------------
# On this 2-core host the proxy cannot have cores of its own with 2 threads,
# so all three share both: the figure is efficiency (requests per proxy
# CPU-second), not throughput.
for rep in $(seq "$REPS"); do
    want threads || break
    SAVED_LOAD_CPU=$LOAD_CPU
    LOAD_CPU=0,1
    for kind in guard-t1 guard-t2; do
        log "[$rep/$REPS] threads $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        taskset -c "$LOAD_CPU" wrk -t1 -c"$PT_CONNS" -d"${WARM}s" "http://127.0.0.1:$PROXY_PORT/" >/dev/null
        wrk_run "threads-$kind-$rep" "$PROXY_PORT" "$PT_DUR"
        record figure=threads proxy="$kind" rep="$rep" \
            wrk="$OUT/raw/threads-$kind-$rep.wrk" cpu="$OUT/raw/threads-$kind-$rep.cpu"
        stop "$PROXY_PID"
    done
    LOAD_CPU=$SAVED_LOAD_CPU
done

# ---- 2. idle connections (same backend) ----------------------------------------
for rep in $(seq "$REPS"); do
    want idle || break
    IDLE_KINDS=(forward guard haproxy)
    [[ -z $BIN_BEFORE ]] || IDLE_KINDS=(forward guard-before guard haproxy)
    for kind in "${IDLE_KINDS[@]}"; do
        log "[$rep/$REPS] $IDLE_CONNS idle connections: $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        # One request first, so the upstream pool and lazy state exist before the baseline.
        curl -fsS -o /dev/null "http://127.0.0.1:$PROXY_PORT/"
        sleep 0.5
        r0=$(rss_kb "$PROXY_PID")
        coproc taskset -c "$LOAD_CPU" python3 "$B/idle.py" --port "$PROXY_PORT" --count "$IDLE_CONNS" --hold 60
        IDLE_PID=$COPROC_PID
        IDLE_IN=${COPROC[1]}
        PIDS+=("$IDLE_PID")
        read -r -t 60 ready ok <&"${COPROC[0]}" || { echo "guard.sh: idle.py did not get ready" >&2; exit 1; }
        sleep 1
        r1=$(rss_kb "$PROXY_PID")
        ok_conns=$ok
        # Closing its stdin ends idle.py, which closes the connections.
        eval "exec $IDLE_IN>&-"
        stop "$IDLE_PID"
        record figure=idle proxy="$kind" rep="$rep" conns="$IDLE_CONNS" ok="$ok_conns" rss0_kb="$r0" rss1_kb="$r1"
        stop "$PROXY_PID"
    done
done

# ---- 2b. bursts of connections (same backend; issue 37) -------------------------
# Does RSS ratchet up burst after burst, and is it glibc's malloc arenas: the
# guard once more with MALLOC_ARENA_MAX=1.
for rep in $(seq "$REPS"); do
    want burst || break
    BURST_KINDS=(forward guard guard-arena1 haproxy)
    [[ -z $BIN_BEFORE ]] || BURST_KINDS=(forward guard-before guard guard-arena1 haproxy)
    for kind in "${BURST_KINDS[@]}"; do
        log "[$rep/$REPS] $BURST_ROUNDS bursts of $BURST_CONNS connections: $kind"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        # One request first, so the upstream pool and lazy state exist before the baseline.
        curl -fsS -o /dev/null "http://127.0.0.1:$PROXY_PORT/"
        sleep 0.5
        r0=$(rss_kb "$PROXY_PID")
        # burst.py runs a round, prints "round K OK FAILED SECONDS" and waits for
        # a line on its stdin before the next one; its own bounds: 5 s per
        # connect and answer, 120 s a round, 120 s waiting for the line.
        coproc taskset -c "$LOAD_CPU" python3 "$B/burst.py" --port "$PROXY_PORT" \
            --count "$BURST_CONNS" --rounds "$BURST_ROUNDS"
        BURST_PID=$COPROC_PID
        PIDS+=("$BURST_PID")
        # Our own copies of its pipes: bash drops COPROC when it exits after the last round.
        exec {BURST_OUT}<&"${COPROC[0]}" {BURST_IN}>&"${COPROC[1]}"
        for k in $(seq "$BURST_ROUNDS"); do
            read -r -t 180 word kk ok failed secs <&"$BURST_OUT" && [[ $word = round && $kk = "$k" ]] ||
                { echo "guard.sh: burst.py gave no result for round $k (see $OUT/logs)" >&2; exit 1; }
            sleep 1
            kill -0 "$PROXY_PID" 2>/dev/null || { echo "guard.sh: $kind died in round $k (see $OUT/logs)" >&2; exit 1; }
            r=$(rss_kb "$PROXY_PID")
            # Threads: glibc gives a thread its own malloc arena when it finds the others busy.
            threads=$(awk '/^Threads:/ {print $2}' "/proc/$PROXY_PID/status")
            record figure=burst proxy="$kind" rep="$rep" round="$k" conns="$BURST_CONNS" ok="$ok" \
                failed="$failed" secs="$secs" rss0_kb="$r0" rss_kb="$r" threads="$threads"
            log "round $k: $ok of $BURST_CONNS 2xx, $failed failed, ${secs} s; RSS $((r0 / 1024)) -> $((r / 1024)) MiB"
            ((k == BURST_ROUNDS)) || echo next >&"$BURST_IN"
        done
        exec {BURST_IN}>&- {BURST_OUT}<&-
        stop "$BURST_PID"
        stop "$PROXY_PID"
    done
done
stop "$BACKEND_PID"

fi

# ---- 3. overload at 3× capacity ------------------------------------------------
if want overload; then
start_backend over --workers "$WORKERS" --sleep-ms "$SLEEP_MS"
OL_KINDS=(guard guard-adaptive haproxy haproxy-nolimit)
TMPL[guard]="$B/guard-overload.toml"
TMPL[guard-adaptive]="$B/guard-overload-adaptive.toml"
TMPL[haproxy]="$B/haproxy-overload.cfg"
TMPL[haproxy-nolimit]="$B/haproxy-nolimit.cfg"
LOW_RATE=$((CAP_INT / 5))
HIGH_RATE=$((CAP_INT * 3))
for rep in $(seq "$REPS"); do
    for kind in "${OL_KINDS[@]}"; do
        log "[$rep/$REPS] overload $kind: unloaded at $LOW_RATE/s, then $HIGH_RATE/s"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        # Warm-up of the generator and the proxy (one second at the low rate).
        taskset -c "$LOAD_CPU" "$OHA" --no-tui -n "$LOW_RATE" -q "$LOW_RATE" -c 20 -t 5s "http://127.0.0.1:$PROXY_PORT/" >/dev/null
        oha_run "unloaded-$kind-$rep" "$PROXY_PORT" "$LOW_RATE" $((LOW_RATE * OL_DUR / 2)) 5s
        oha_run "over-$kind-$rep" "$PROXY_PORT" "$HIGH_RATE" $((HIGH_RATE * OL_DUR)) 5s
        record figure=overload proxy="$kind" rep="$rep" capacity="$CAPACITY" rate="$HIGH_RATE" \
            unloaded="$OUT/raw/unloaded-$kind-$rep" over="$OUT/raw/over-$kind-$rep"
        stop "$PROXY_PID"
        sleep 1   # the backend's queue, if any, drains
    done
done
stop "$BACKEND_PID"

fi

# ---- 4. failing backend: attempts per request ------------------------------------
if want storm; then
start_backend storm --status 503
TMPL[guard]="$B/guard-storm.toml"
TMPL[guard-breaker]="$B/guard-storm-breaker.toml"
TMPL[haproxy]="$B/haproxy-storm.cfg"
STORM_N=$((STORM_RATE * STORM_DUR))
for rep in $(seq "$REPS"); do
    for kind in guard guard-breaker haproxy; do
        log "[$rep/$REPS] storm $kind: $STORM_N requests at $STORM_RATE/s, backend 503 always"
        start_proxy "$kind" "${TMPL[$kind]}" "$BACKEND_PORT"
        c0=$(backend_count)
        oha_run "storm-$kind-$rep" "$PROXY_PORT" "$STORM_RATE" "$STORM_N" 5s
        c1=$(backend_count)
        record figure=storm proxy="$kind" rep="$rep" requests="$STORM_N" attempts=$((c1 - c0)) \
            oha="$OUT/raw/storm-$kind-$rep"
        stop "$PROXY_PID"
    done
done
stop "$BACKEND_PID"

fi

# ---- 5. soak: the guard at 10× capacity ---------------------------------------------
if want soak; then
SOAK_RATE=$((CAP_INT * 10))
SOAK_N=$((SOAK_RATE * SOAK_MIN * 60))
log "soak: the guard at $SOAK_RATE/s for $SOAK_MIN min ($SOAK_N requests), RSS every 10 s"
start_backend soak --workers "$WORKERS" --sleep-ms "$SLEEP_MS"
TMPL[guard]="$B/guard-overload.toml"
start_proxy guard "${TMPL[guard]}" "$BACKEND_PORT"
(
    t=0
    while kill -0 "$PROXY_PID" 2>/dev/null; do
        echo "$t $(rss_kb "$PROXY_PID")"
        sleep 10
        t=$((t + 10))
    done
) >"$OUT/raw/soak-rss.txt" &
SAMPLER=$!
PIDS+=("$SAMPLER")
oha_run soak "$PROXY_PORT" "$SOAK_RATE" "$SOAK_N" 5s
stop "$SAMPLER"
curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" >"$OUT/raw/soak-metrics.txt" || true
record figure=soak proxy=guard rate="$SOAK_RATE" requests="$SOAK_N" minutes="$SOAK_MIN" \
    rss="$OUT/raw/soak-rss.txt" oha="$OUT/raw/soak"
stop "$PROXY_PID"
stop "$BACKEND_PID"

fi

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
echo "$STEAL0 $(steal) $(( $(date +%s) - STEAL_T0 )) $(getconf CLK_TCK)" | awk '{
    n = (NF - 2) / 4; out = ""
    for (i = 1; i <= n; i++) out = out sprintf("%s%s %.1f%%", i > 1 ? ", " : "", $(2*i-1), ($(2*n+2*i) - $(2*i)) / $(NF) / $(NF-1) * 100)
    print "cpu time stolen by the host during the run (/proc/stat steal): " out " of " $(NF-1) " s"
}' >>"$OUT/meta.txt"
python3 "$B/report.py" tables "$RESULTS" "$OUT/meta.txt" | tee "$OUT/tables.md"
log "raw outputs in $OUT"
