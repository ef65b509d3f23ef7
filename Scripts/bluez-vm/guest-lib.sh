# shellcheck shell=bash
# Shared by guest-run and restart-bluetoothd (guest side, bash, chrooted into
# the read-only host root). Sourced, not executed.
#
# State lives in /run/able-vm (guest tmpfs); logs in /run/able-vm/out (the
# run's log directory on the host, shared over 9p).

ABLE_VM_STATE=/run/able-vm
ABLE_VM_OUT=/run/able-vm/out
# The adapters btvirt makes (guest-run writes the list: hci0 hci1 hci2).
ABLE_VM_ADAPTERS="$(cat "$ABLE_VM_STATE/adapters" 2> /dev/null || echo hci0 hci1)"

uptime_s() { cut -d' ' -f1 /proc/uptime; }

# log MESSAGE: to stdout (guest-run sends its stdout to out/guest.log).
log() { echo "[$(uptime_s)] $*"; }

# is_running PID: true while the process exists and is not a zombie. Builtins only (no process):
# loops call it every second or faster.
is_running() {
    local stat
    [ -n "$1" ] && read -r stat 2> /dev/null < "/proc/$1/stat" || return 1
    # field 3 of /proc/PID/stat, after the ") " that ends the command name
    stat="${stat##*) }"
    [ -n "$stat" ] && [ "${stat:0:1}" != Z ]
}
is_stopped() { ! is_running "$1"; }

# wait_for TIMEOUT-SECONDS COMMAND...: poll until COMMAND succeeds. Every
# process costs ~0.1 s of the guest's single emulated CPU, which bluetoothd
# needs too: poll every 0.3 s, with as few processes per check as possible.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.3
    done
}

bluez_has_owner() {
    dbus-send --system --print-reply --reply-timeout=5000 --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.bluez 2> /dev/null \
        | grep -q 'boolean true'
}
bluez_has_no_owner() { ! bluez_has_owner; }

# adapter_property HCI NAME: print the value line of Adapter1.NAME, or fail.
adapter_property() {
    dbus-send --system --print-reply=literal --reply-timeout=5000 --dest=org.bluez \
        "/org/bluez/$1" org.freedesktop.DBus.Properties.Get \
        string:org.bluez.Adapter1 "string:$2" 2> /dev/null
}
adapter_address() { adapter_property "$1" Address | awk '{ print $NF }'; }

# bluez_ready: every adapter is on D-Bus and powered. One GetManagedObjects
# call: in its dump, top-level keys are `object path "..."` lines, and a
# property's value follows its `string "Name"` line.
bluez_ready() {
    dbus-send --system --print-reply --reply-timeout=5000 --dest=org.bluez / \
        org.freedesktop.DBus.ObjectManager.GetManagedObjects 2> /dev/null \
        | awk -v want="$ABLE_VM_ADAPTERS" '
            /^ *object path "/ { path = $3; gsub(/"/, "", path); next }
            /string "Powered"/ { powered_next = 1; next }
            powered_next { if (/boolean true/) on[path] = 1; powered_next = 0 }
            END {
                n = split(want, hci, " ")
                for (i = 1; i <= n; i++) if (!on["/org/bluez/" hci[i]]) exit 1
            }'
}

# power_on_stragglers: an adapter that is on D-Bus but still unpowered gets
# Powered=true (bluetoothd normally does that itself, AutoEnable).
power_on_stragglers() {
    local hci
    for hci in $ABLE_VM_ADAPTERS; do
        if adapter_property "$hci" Powered | grep -q 'boolean false'; then
            log "$hci is on D-Bus but not powered: setting Powered=true"
            dbus-send --system --print-reply --reply-timeout=10000 --dest=org.bluez \
                "/org/bluez/$hci" org.freedesktop.DBus.Properties.Set \
                string:org.bluez.Adapter1 string:Powered variant:boolean:true > /dev/null 2>&1
        fi
    done
}

# wait_bluez_ready TIMEOUT: until every adapter is on D-Bus and powered;
# halfway through, power on any adapter bluetoothd left unpowered. Fails at
# once if bluetoothd exits.
wait_bluez_ready() {
    local deadline=$((SECONDS + $1)) halfway=$((SECONDS + $1 / 2)) nudged=0 pid
    pid="$(cat "$ABLE_VM_STATE/bluetoothd.pid" 2> /dev/null)"
    until bluez_ready; do
        if ! is_running "$pid"; then
            log "bluetoothd $pid has exited"
            return 1
        fi
        [ "$SECONDS" -lt "$deadline" ] || return 1
        if [ "$nudged" = 0 ] && [ "$SECONDS" -ge "$halfway" ]; then
            power_on_stragglers
            nudged=1
        fi
        sleep 0.3
    done
}

# start_bluetoothd: start bluetoothd with the options guest-run saved, in a
# session of its own (it outlives the test process that may have asked for a
# restart), with stdio on the log and every other descriptor closed, so that
# it holds no pipe of its caller open (a caller reading our output to EOF
# would wait for bluetoothd to exit).
start_bluetoothd() {
    local btd opts pid
    btd="$(cat "$ABLE_VM_STATE/bluetoothd.path")"
    opts="$(cat "$ABLE_VM_STATE/bluetoothd.opts")${1:+ $1}"
    echo "==== able-vm: starting bluetoothd $opts at guest uptime $(uptime_s)" >> "$ABLE_VM_OUT/bluetoothd.log"
    (
        for fd in /proc/self/fd/*; do
            fd="${fd##*/}"
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
        done
        # setsid execs (no fork: this subshell leads no process group),
        # so $! below is bluetoothd's pid
        # shellcheck disable=SC2086  # opts is a word list
        exec setsid "$btd" $opts
    ) < /dev/null >> "$ABLE_VM_OUT/bluetoothd.log" 2>&1 &
    pid=$!
    echo "$pid" > "$ABLE_VM_STATE/bluetoothd.pid"
    log "bluetoothd started, pid $pid"
}

# stop_bluetoothd --bus-wait|--no-bus-wait: SIGTERM the current bluetoothd
# (SIGKILL after 10 s), wait until it is gone and, with --bus-wait, until
# org.bluez has no owner on the bus (so that a new one can take the name).
stop_bluetoothd() {
    local pid
    pid="$(cat "$ABLE_VM_STATE/bluetoothd.pid" 2> /dev/null)"
    if is_running "$pid"; then
        kill -TERM "$pid"
        if ! wait_for 10 is_stopped "$pid"; then
            log "bluetoothd $pid ignored SIGTERM; SIGKILL"
            kill -KILL "$pid" 2> /dev/null
            wait_for 5 is_stopped "$pid"
        fi
        log "bluetoothd $pid stopped"
        echo "==== able-vm: bluetoothd $pid stopped at guest uptime $(uptime_s)" >> "$ABLE_VM_OUT/bluetoothd.log"
    fi
    rm -f "$ABLE_VM_STATE/bluetoothd.pid"
    [ "$1" = --no-bus-wait ] || wait_for 10 bluez_has_no_owner
}
