"""Background-traffic agent: real TCP flows between emulated hosts, one process per host.

Run inside a host's network namespace (a Mininet host)::

    python -m testbed.traffic.flowgen CONFIG.json

Design. The flows come from ``testbed.traffic.distributions.plan_flows`` (the
HPCC generator's rule: Poisson arrivals per sending host, sizes from a
datacenter CDF, uniform destinations; PA-ATP injects Hadoop flows this way at
loads 0.2-0.8; docs/guide/network-dynamics.md gives the rule). A *source* opens one TCP
connection per flow at the flow's start time, writes ``size_bytes`` zero bytes,
half-closes, and waits for the *sink*'s one-byte acknowledgement that it read
every byte up to EOF. Flow i of a source leaves from port ``source_port(i)``
(UDP flows too), so that ECMP per flow puts it on the same path in every
run of a seed; when that port's earlier connection to the same sink still
holds the four-tuple (open, or in TIME_WAIT after the ports wrapped), the
flow leaves from a port the kernel picks instead of failing until its
deadline. The flow completion time (FCT) is measured by the source,
from the start of the successful ``connect`` to the arrival of that
acknowledgement. Both roles run one single-threaded ``selectors`` event loop
with non-blocking sockets, so hundreds of concurrent flows cost one select per
batch of ready sockets, and a new flow starts as soon as its timer is due
(select sleeps exactly until the next start time, retry or deadline).

Readiness is never waited for with fixed sleeps: a source whose connect fails
(e.g. the sink is not listening yet) retries with a bounded exponential backoff
(10 ms doubling to 200 ms) until the deadline. Each role stops at its deadline
or on SIGTERM/SIGINT, records what was unfinished, flushes its output and exits
0. A malformed config exits 2 with a one-line message on stderr. Output is one
start line and one summary line on stdout; nothing per packet.

Config (JSON object):

``{"role": "sink", "port": 5001, "listen_ip": "0.0.0.0", "stop_epoch_s": 1700000030.0, "output": "sink.jsonl"}``
    ``port`` is required; ``listen_ip`` defaults to ``0.0.0.0``; without
    ``stop_epoch_s`` the sink runs until SIGTERM; without ``output`` it records
    nothing; ``congestion_control`` sets its listener's (connections inherit
    it: a DCTCP receiver echoes each segment's CE mark, RFC 8257). A sink
    record is one JSON line per connection:
    ``{"peer": "10.0.0.1:40312", "bytes": 1460, "duration_s": 0.0021, "completed": true,
    "congestion_control": "cubic"}`` (``completed``: EOF reached and
    acknowledged; ``duration_s`` from accept to EOF; ``congestion_control``
    what the connection's socket reported using).

``{"role": "source", "src": "h1", "start_epoch_s": ..., "stop_epoch_s": ..., "output": "flows.jsonl", "flows": [...]}``
    ``flows`` is a list of ``{"dst": "10.0.0.2", "port": 5001, "start_s": 0.013, "size_bytes": 1460}``
    where ``dst`` is an IPv4 address and ``start_s`` the offset from
    ``start_epoch_s`` (wall clock, seconds since the epoch). ``stop_epoch_s``
    is the deadline; ``src`` is a label copied into each record (default: the
    host name). ``congestion_control`` names the TCP congestion control of
    every flow (``TCP_CONGESTION`` on its socket, e.g. ``"cubic"``); without
    it the flows use the kernel's default, whatever the host was set to. The
    source exits as soon as every flow is recorded. Each flow is one JSON
    line, written when it ends:
    ``{"src": "h1", "dst": "10.0.0.2", "size_bytes": 1460, "start_s": 0.013, "fct_s": 0.0021,
    "completed": true, "congestion_control": "cubic", "ecn": false, "syn_retransmitted": false}``
    with ``start_s`` the planned offset, ``fct_s`` null when not completed
    (connection refused until the deadline, reset, or still running at stop),
    ``congestion_control`` what the socket reported using (null if it never
    had one), and ``ecn`` whether the connection negotiated ECN (TCP_INFO's
    ``TCPI_OPT_ECN``: the host's ``net.ipv4.tcp_ecn`` asked for it and the sink
    agreed; false if it never connected), and ``syn_retransmitted`` whether its
    SYN had to be sent again (TCP_INFO's ``tcpi_total_retrans`` when it
    connected): Linux then asks no more for ECN (``net.ipv4.tcp_ecn_fallback``,
    RFC 3168 §6.1.1.1), so such a connection runs without it.

Constant-rate UDP flows. A *udp-source* sends each flow's datagrams at a
constant rate from ``start_epoch_s + start_s`` for ``duration_s``; a
*udp-sink* counts what arrives. ``rate_bps`` counts IP packets: each datagram
is ``datagram_bytes`` of UDP payload plus 28 bytes of IPv4 (20) and UDP (8)
headers, so datagrams leave every ``(datagram_bytes + 28) * 8 / rate_bps``
seconds. On the wire each is an Ethernet frame 14 bytes longer (the link
shaper counts frames, without preamble or FCS), so a flow occupies
``rate_bps * (datagram_bytes + 42) / (datagram_bytes + 28)`` of a shaped link.
The payload is zeros after a 12-byte header: the flow's index in ``flows``
(uint32) and its sequence number (uint64), network byte order
(``struct`` ``"!IQ"``); the sequence counts the datagrams the kernel accepted,
0, 1, 2, ... Departure *k* is due at ``start + k * interval``; one select
(microsecond timeout) sleeps until the next due departure of any flow. A loop
that wakes late sends at most ``MAX_BURST_DATAGRAMS`` (8) datagrams of a flow
at once and forgives the older backlog, so a stall never turns into a burst;
a source that cannot keep up sends less, as its record shows. A send that
fails (ENOBUFS/EAGAIN: the socket's send buffer or the device queue is full;
any other per-datagram error too) is counted in ``send_drops`` and not
retried. Each flow sends from its own socket (its own source port; a
switch hashing ports would spread them, while the emulated switches choose
among parallel links by source and destination, so one pair's flows share
a path). Linux drops silently, without ENOBUFS, a UDP datagram
that a full qdisc of the sender's own interface refuses after the socket
accepted it; the sink's ``lost`` counts those.

``{"role": "udp-sink", "port": 5101, "listen_ip": "0.0.0.0", "stop_epoch_s": ..., "output": "udp-sink.jsonl"}``
    ``port`` and ``output`` are required; ``listen_ip`` defaults to
    ``0.0.0.0``; without ``stop_epoch_s`` the sink runs until SIGTERM. The
    socket asks for a 4 MB receive buffer (SO_RCVBUFFORCE, else SO_RCVBUF,
    which ``net.core.rmem_max`` caps; the start line quotes what it got) and
    each wake reads every queued datagram (up to 4096 before it looks at the
    clock again). At stop it writes one JSON line per (peer address, flow index):
    ``{"peer": "10.0.0.7", "flow": 0, "datagrams": 311, "bytes": 319708, "lost": 2}``
    with ``bytes`` the IP bytes (payload + 28 per datagram) and ``lost`` =
    highest sequence seen + 1 - ``datagrams`` (so losses after the last
    datagram that arrived are not seen; clamped at 0 should a datagram be
    duplicated). Two udp-sources on one host sending the same flow index to
    one sink would be counted together. Datagrams shorter than the header are
    counted on the summary line only.

``{"role": "udp-source", "src": "h7", "start_epoch_s": ..., "stop_epoch_s": ..., "output": "u.jsonl", "flows": [...]}``
    ``flows`` is a list of
    ``{"dst": "10.0.0.9", "port": 5101, "start_s": 0.0, "duration_s": 2.5, "rate_bps": 3.2e6, "datagram_bytes": 1000}``:
    ``dst`` an IPv4 address, ``port`` 1-65535, ``start_s`` >= 0,
    ``duration_s`` > 0, ``rate_bps`` > 0 and ``datagram_bytes`` an integer
    from 12 to 1472 (default 1000); ``src`` and the epochs as for ``source``.
    The source exits when every flow has sent its last datagram, at
    ``stop_epoch_s`` or on SIGTERM/SIGINT, and then writes one JSON line per
    flow, in the order of ``flows``: ``src``, ``flow``, then the flow's ``dst``,
    ``port``, ``start_s``, ``duration_s``, ``rate_bps`` and ``datagram_bytes``
    as configured, then what it did, e.g. for the flow above
    ``"sent_datagrams": 973, "sent_bytes": 1000244, "send_drops": 0, "max_start_lag_s": 0.00012, "completed": true``.
    ``flow`` is the index the sink reports, ``sent_bytes`` counts IP bytes
    (``sent_datagrams * (datagram_bytes + 28)``), ``max_start_lag_s`` is the
    latest that a departure of the flow (its first included) was served after
    its due time (null if the flow never started), and ``completed`` is false
    for a flow still due to send at the deadline or the signal. A complete,
    unimpeded flow sends ``ceil(duration_s / interval)`` datagrams.

Modules. :mod:`.agent` is the entry point (``main``: one role per process,
signal handling, the start and summary lines); :mod:`.config` reads and
checks a config; :mod:`.tcp` holds the TCP source and sink, :mod:`.udp` the
constant-rate UDP source and sink; :mod:`.eventloop` what their select loops
share (stop flag, clock, the sinks' loop); :mod:`.source_ports` the seeded
source port of each flow; :mod:`.stats` the summaries of their records.
"""
from testbed.traffic.flowgen.agent import main
from testbed.traffic.flowgen.config import load_config
from testbed.traffic.flowgen.eventloop import _StopFlag
from testbed.traffic.flowgen.source_ports import SOURCE_PORTS, source_port
from testbed.traffic.flowgen.stats import received_load, summarise_flows
from testbed.traffic.flowgen.tcp import congestion_control_error
from testbed.traffic.flowgen.udp import ETHERNET_HEADER_BYTES, MAX_BURST_DATAGRAMS, UDP_IP_OVERHEAD_BYTES, _UdpSource

__all__ = ["ETHERNET_HEADER_BYTES", "MAX_BURST_DATAGRAMS", "SOURCE_PORTS", "UDP_IP_OVERHEAD_BYTES", "_StopFlag",
           "_UdpSource", "congestion_control_error", "load_config", "main", "received_load", "source_port",
           "summarise_flows"]
