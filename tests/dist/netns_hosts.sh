#!/bin/sh
# Two simulated hosts on this machine: network namespaces oarA<pid> (10.231.0.1) and oarB<pid>
# (10.231.0.2) joined by a veth pair, each process tree in its own UTS namespace with its own
# host name (oar-host-a, oar-host-b: Open MPI tells nodes apart by name), and an rsh agent for
# Open MPI that starts its remote daemon in the namespaces of the host it is given
# (`ip netns exec` + `unshare --uts`), as ssh would on another machine.
#   netns_hosts.sh 'COMMAND LINE'
# runs the command line with sh inside host A, with OAR_NS_AGENT (the agent's path),
# OAR_NS_IPS=10.231.0.1,10.231.0.2 and OAR_NS_MPIRUN (the mpirun arguments that select the
# agent and TCP over the veth pair) in its environment, then removes everything it made.
# Exit status: the command's; 77 (a skip, with the reason) where namespaces cannot be made.
set -u
A=oarA$$ B=oarB$$ VA=oara$$ VB=oarb$$
dir=$(mktemp -d) || exit 1
cleanup() {
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2) to make network namespaces"
command -v unshare >/dev/null 2>&1 || skip "no unshare command (util-linux) to give each host its own name"
unshare --uts true 2>/dev/null || skip "cannot make a UTS namespace (unshare --uts: needs root or CAP_SYS_ADMIN)"
err=$(ip netns add "$A" 2>&1) || skip "cannot make a network namespace (ip netns add: $err; needs root or CAP_SYS_ADMIN)"
err=$(ip netns add "$B" 2>&1) || skip "cannot make a second network namespace ($err)"
err=$(ip link add "$VA" type veth peer name "$VB" 2>&1) || skip "cannot make a veth pair ($err)"
set -e
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add 10.231.0.1/24 dev "$VA"
ip -n "$B" addr add 10.231.0.2/24 dev "$VB"
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
cat >"$dir/agent" <<EOA
#!/bin/sh
# Open MPI's rsh agent: "agent HOST COMMAND..." runs COMMAND on HOST, here in HOST's namespace.
host=\$1; shift
case \$host in
  10.231.0.1) ns=$A name=oar-host-a ;;
  10.231.0.2) ns=$B name=oar-host-b ;;
  *) echo "netns agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns unshare --uts sh -c "hostname \$name && \$*"
EOA
chmod +x "$dir/agent"
set +e
OAR_NS_AGENT="$dir/agent" OAR_NS_IPS=10.231.0.1,10.231.0.2 \
OAR_NS_MPIRUN="--mca plm_rsh_agent $dir/agent --mca btl self,tcp --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24" \
  ip netns exec "$A" unshare --uts sh -c "hostname oar-host-a && $1"
