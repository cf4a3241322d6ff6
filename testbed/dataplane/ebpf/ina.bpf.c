// SPDX-License-Identifier: GPL-2.0
/*
 * ina.bpf.c -- p4/ina.p4 as two TC programs on every port of a switch: the ebpf target.
 *
 * ina_ingress (TC ingress of each port) is ina.p4's Ingress control, ina_egress (TC egress of
 * each port, before the port's qdisc) its Egress control and the traffic manager's queue. The
 * controls, their order and their branches follow ina.p4 line for line; what differs, because a
 * kernel is not a v1model switch, is said where it happens:
 *
 * - Registers are maps. The per-slot registers (agg_count, agg_job, ... agg_collided_seq,
 *   agg_value's lanes) are one map value per slot, `agg_slots`, with a spin lock: a packet's
 *   whole read-decide-write of its slot is atomic, as bmv2's one ingress thread makes it; PA-ATP's
 *   per-job registers change by atomic adds, exchanges and compare-and-swaps (agg_used under the
 *   lock of the slot it counts). Per-port
 *   registers and counters are one value per port (`port_impair`, `port_counts`); BPF map names
 *   have 15 characters, testbed/dataplane/ebpf/runtime.py maps ina.p4's names onto them.
 * - Tables are hash maps keyed by their match fields (ipv4_lpm an LPM trie), the value the action
 *   and its parameters; a miss is the table's default action.
 * - Multicast is bpf_clone_redirect to each port of the group; a copy that would go back out of
 *   its ingress port is pruned here rather than in Egress (same rule). An ingress clone (a
 *   completing gradient's GACK) is a clone redirected to its ingress port. What Egress must know
 *   of a packet (a multicast copy, a GACK, its ingress port) rides in skb->mark.
 * - Egress runs as the packet is queued (bmv2: as it leaves its queue), so it sees the depth the
 *   packet found, as bmv2's enq_qdepth is. The queue is a model of the port's link: each port
 *   keeps the departure times of the frames it holds (`port_queue`), a frame starts to leave at
 *   max(now, the last one's end) and ends its own bits later at the port's rate; a frame that
 *   finds queue_depth frames ahead is dropped (tail drop), one that finds ecn_threshold ahead is
 *   marked CE. The port's htb qdisc (testbed/dataplane/ebpf/commands.py) sends the frames the
 *   model admitted at the same rate.
 * - A reordered frame cannot go round again in TC: it waits in its port's second htb class, which
 *   is served when the queue's class has nothing to send (its own guaranteed rate is 8 bit/s).
 * - agg_capacity is a token bucket on bpf_ktime_get_ns (bmv2: its own clock in microseconds).
 * - switch_wait is the time from ina_ingress's start to the frame's enqueue (the same CPU runs
 *   both, synchronously).
 * - The lanes are not unrolled: a packet's lanes are copied out before its slot's lock is taken,
 *   summed in a loop under it, and written back after. The verifier checks each control's branches
 *   as global functions (ina_result_path, ina_rina_path, ina_aggregate_path, slot_update, ...),
 *   which keeps its work bounded.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

#ifndef INA_LANES
#define INA_LANES 64
#endif
#ifndef INA_SLOTS
#define INA_SLOTS 1024
#endif
#define INA_PORTS 64
#define INA_STATS 25
#define INA_PA_JOBS 16
#define INA_PA_WORKERS 64
#define INA_PA_SEQS 1024
#define INA_WAIT_CELLS 3
#define INA_GROUP_PORTS 64      /* ports of one multicast group */
#define INA_QUEUE_RING 1024     /* departure times a port keeps: the deepest queue_depth */

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define TC_ACT_REDIRECT 7
#define ETH_P_IP 0x0800
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define INA_UDP_PORT 40000

#define FLAG_DATA      0x0001
#define FLAG_GACK      0x0002
#define FLAG_RESULT    0x0004
#define FLAG_RETX      0x0008
#define FLAG_ECN_ECHO  0x0010
#define FLAG_AECN      0x0020
#define FLAG_COLLISION 0x0040
#define FLAG_CAPACITY  0x0400
#define FLAG_TASK      0x0800
#define FLAG_PULL      0x1000
#define FLAG_GATHER    0x2000
#define FLAG_EVICTED   0x8000

#define RELEASE_ON_EMIT   0
#define RELEASE_ON_RESULT 1
#define RELEASE_SHADOW    2
#define RELEASE_HOLD      3
#define MAX_ITERATION_LEAD 2
#define GACK_TTL 64
#define GACK_IPV4_BYTES 66
#define GACK_UDP_BYTES 46
#define HEADERS_BYTES 80        /* Ethernet, IPv4, UDP, INA: where the lanes start */

enum ina_stat {
	ST_INA_RX, ST_AGGREGATED, ST_EMITTED, ST_DUPLICATE_DROPPED, ST_COLLISION_BYPASSED,
	ST_CAPACITY_BYPASSED, ST_MALFORMED_DROPPED, ST_SLOT_RANGE_DROPPED, ST_FORWARDED,
	ST_NO_ROUTE_DROPPED, ST_PARTIAL_FLUSHED, ST_STALE_RECLAIMED, ST_MULTICAST, ST_RETX_BYPASSED,
	ST_RESULT_RELEASED, ST_LEAD_BYPASSED, ST_GACKED, ST_AECN_MARKED, ST_SHADOW_ANSWERED,
	ST_OVERFLOW_FOLLOWED, ST_RINA_PULLED, ST_RINA_STALE_DROPPED, ST_RINA_REEMITTED, ST_ESA_EVICTED,
	ST_RETX_HELD,
};

/* skb->mark between the controls: MARK_INA says the rest is ours (a frame from another switch of
   the same namespace arrives with that switch's mark; Ingress overwrites it) */
#define MARK_INA        0x80000000u
#define MARK_REPLICA    0x00000100u   /* bmv2's instance type REPLICATION */
#define MARK_GACK       0x00000200u   /* meta.pa_gack, or the ingress clone of a completing gradient */
#define MARK_SECOND     0x00000400u   /* an impairment's duplicate: leaves as its first pass left */
#define MARK_CLONE      0x00000800u   /* bmv2's ingress clone: switch_wait counts its original only */
#define MARK_PORT_MASK  0x0000003fu   /* the ingress port */
/* a shaped port's htb classes (testbed/dataplane/ebpf/commands.py): its queue, and where a reordered frame
   waits (skb->priority names the class, major 1) */
#define HTB_CLASS_QUEUE     0x00010010u
#define HTB_CLASS_REORDERED 0x00010020u

/* ------------------------------------------------------------------ headers */

struct ina_hdr {
	__be16 job;
	__be16 flags;
	__u8 elems;
	__u8 level;
	__be16 agg_node;
	__be16 fanin;
	__be16 count;
	__be16 submodel;
	__be32 iteration;
	__be32 seq;
	__be32 slot;
	__be64 bitmap;
	__be32 progress;
} __attribute__((packed));

struct frame {
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;
	struct ina_hdr ina;
} __attribute__((packed));

/* ------------------------------------------------------------------ registers */

/* maps by kind: an array (registers, counters, per-port values), one per CPU (scratch), a hash (tables) */
#define ARRAY_MAP(name, value_type, size) \
	struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, size); \
		 __type(key, __u32); __type(value, value_type); } name SEC(".maps")
#define PERCPU_MAP(name, value_type, size) \
	struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, size); \
		 __type(key, __u32); __type(value, value_type); } name SEC(".maps")
#define HASH_MAP(name, key_type, value_type, size) \
	struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, size); \
		 __type(key, key_type); __type(value, value_type); } name SEC(".maps")

struct agg_slot {
	struct bpf_spin_lock lock;
	__u16 count;            /* agg_count: 0 = free */
	__u16 job;              /* agg_job */
	__u32 iteration;        /* agg_iteration */
	__u32 seq;              /* agg_seq */
	__u16 submodel;         /* agg_submodel */
	__u8 elems;             /* agg_elems */
	__u8 resulted;          /* agg_resulted */
	__u64 bitmap;           /* agg_bitmap */
	__u16 collided_job;     /* agg_collided_job */
	__u16 pad;
	__u32 collided_iteration;
	__u32 collided_seq;
	__s32 value[INA_LANES]; /* agg_value, host order */
};

ARRAY_MAP(agg_slots, struct agg_slot, INA_SLOTS);


ARRAY_MAP(agg_used, __u32, INA_PA_JOBS);
ARRAY_MAP(pa_seq, __u32, INA_PA_JOBS * INA_PA_WORKERS);
ARRAY_MAP(pa_seq_sum, __u32, INA_PA_JOBS);
ARRAY_MAP(pa_overflow, __u32, INA_PA_JOBS * INA_PA_SEQS);
ARRAY_MAP(pa_overflowed, __u32, INA_PA_JOBS);
ARRAY_MAP(aecn_threshold, __u32, INA_PA_JOBS);
ARRAY_MAP(ecn_threshold, __u32, 1);
ARRAY_MAP(switch_wait, __u64, INA_WAIT_CELLS);
/* ina_stats: one value holding every cell, so that a slot's critical section (no helper call allowed)
   counts through a pointer fetched before it */
struct stats { __u64 cell[INA_STATS]; };
ARRAY_MAP(ina_stats, struct stats, 1);
/* the switch's port number -> its interface, and back */
ARRAY_MAP(port_ifindex, __u32, INA_PORTS);
HASH_MAP(ifindex_port, __u32, __u32, INA_PORTS);

/* Egress's per-port registers and counters, one value per port */
struct port_impair {
	__u32 drop;             /* impair_drop */
	__u32 duplicate;        /* impair_duplicate */
	__u32 reorder;          /* impair_reorder */
};
struct port_counts {
	__u64 ina_tx;           /* port_ina_tx */
	__u64 ecn_marked;       /* port_ecn_marked */
	__u64 impair_dropped;
	__u64 impair_duplicated;
	__u64 impair_reordered;
	__u64 queue_dropped;    /* tail drops of the port's queue (pyswitch counts them too, bmv2 does not) */
};
ARRAY_MAP(port_impair, struct port_impair, INA_PORTS);
ARRAY_MAP(port_counts, struct port_counts, INA_PORTS);

/* the traffic manager: a port's rate and depth (set_port_shaping) and the departure times it holds */
struct port_queue {
	struct bpf_spin_lock lock;
	__u32 depth;            /* queue_depth, frames; 0: unshaped */
	__u32 head, tail;       /* ring[head .. tail) departs after now */
	__u64 rate_bps;
	__u64 last_departure_ns;
	__u64 ring[INA_QUEUE_RING];
};
ARRAY_MAP(port_queue, struct port_queue, INA_PORTS);

/* agg_capacity: a packets meter (token bucket) */
struct meter {
	struct bpf_spin_lock lock;
	__u64 rate_milli;       /* tokens per 1000 s; 0: not configured, every packet green */
	__u64 burst;            /* tokens */
	__u64 tokens_pico;      /* tokens x 1e12 */
	__u64 last_ns;
};
#define TOKEN_PICO 1000000000000ull
#define METER_REFILL_NS 10000000000ull   /* a longer pause fills the bucket (and keeps the product in 64 bits) */
ARRAY_MAP(agg_capacity, struct meter, 1);

/* the time ina_ingress started on this CPU: switch_wait's start (Egress runs on the same CPU, within the
   redirect that ends Ingress) */
PERCPU_MAP(ingress_started, __u64, 1);

/* ------------------------------------------------------------------ tables */

struct forward_action {          /* route_forward / route_ecmp / ipv4_forward */
	__u8 mac[6];
	__u16 action;            /* ACT_FORWARD, ACT_ECMP, ACT_DROP */
	__u32 port;              /* port, or first_port */
	__u32 ports;             /* route_ecmp */
};
#define ACT_FORWARD 1
#define ACT_ECMP 2
#define ACT_DROP 3

struct route_key { __be32 src, dst; };
HASH_MAP(route, struct route_key, struct forward_action, 4096);

struct lpm_key { __u32 prefixlen; __be32 addr; };
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__type(key, struct lpm_key);
	__type(value, struct forward_action);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} ipv4_lpm SEC(".maps");

struct filter_key { __u16 job, agg_node, submodel, pad; };
struct aggregate_action {        /* ina_aggregate */
	__be32 switch_addr;
	__u32 slot_base, slot_count;
	__u32 release_mode;
	__u16 next_agg_node, next_fanin;
	__be32 next_dst;
	__u32 next_slot_base, next_slot_count;
	__be32 bypass_dst, overflow_dst;
	__u16 overflow_agg_node, overflow_fanin;
	__u32 overflow_slot_base, overflow_slot_count;
};
HASH_MAP(ina_filter, struct filter_key, struct aggregate_action, 4096);

struct job_dst_key { __u16 job, pad; __be32 dst; };
struct result_action {           /* ina_multicast / ina_release / ina_shadow_result */
	__u32 action;            /* ACT_MULTICAST, ACT_RELEASE, ACT_SHADOW */
	__u32 slot_base, slot_count;   /* slot_count: ina_shadow_result's pool */
	__u32 mcast_grp;
};
#define ACT_MULTICAST 1
#define ACT_RELEASE 2
#define ACT_SHADOW 3
HASH_MAP(ina_result, struct job_dst_key, struct result_action, 4096);
HASH_MAP(rina_gather, struct job_dst_key, struct result_action, 4096);    /* ina_multicast only */

struct pa_action { __u32 pa_index, aecn; };
HASH_MAP(pa_job, __u32, struct pa_action, 4096);          /* key: the job */

HASH_MAP(esa_job, __u32, __u32, 4096);                     /* the job -> esa_enable's priority */

struct evict_key { __u16 job, submodel; };
struct evict_action {            /* esa_evict_to */
	__u16 priority, fanin;
	__be32 overflow_dst;
	__u16 overflow_agg_node, overflow_fanin;
	__u32 overflow_slot_base, overflow_slot_count;
};
HASH_MAP(esa_evict, struct evict_key, struct evict_action, 4096);

struct rack_key { __u16 job, agg_node; };
struct rina_action {             /* rina_aggregate */
	__be32 switch_addr;
	__u32 slot_base, slot_count;
	__u16 pull_grp, gather_grp;
};
HASH_MAP(rina_rack, struct rack_key, struct rina_action, 4096);

struct rewrite_action { __u8 mac[6]; __u16 pad; __be32 ip; };   /* mcast_rewrite */
HASH_MAP(ina_mcast_rewrite, __u32, struct rewrite_action, INA_PORTS);   /* key: the egress port */

/* mirror sessions (mirroring_add): session -> port. A GACK clone goes to GACK_SESSION_BASE + its ingress
   port, an impairment's duplicate to IMPAIR_SESSION_BASE + its egress port; without the session the clone
   goes nowhere, as bmv2 drops a clone to an unconfigured session */
#define GACK_SESSION_BASE 2000
#define IMPAIR_SESSION_BASE 1000
HASH_MAP(mirror_sessions, __u32, __u32, 4 * INA_PORTS);

struct mc_group { __u32 count; __u32 ports[INA_GROUP_PORTS]; };
HASH_MAP(mc_groups, __u32, struct mc_group, 4096);

/* ------------------------------------------------------------------ helpers */

static __always_inline void count(__u32 index)
{
	__u32 zero = 0;
	struct stats *stats = bpf_map_lookup_elem(&ina_stats, &zero);
	if (stats && index < INA_STATS)
		__sync_fetch_and_add(&stats->cell[index], 1);
}

/* *cell -= by, but not below 0, in one atomic step (ina.p4's read-then-write is one step in bmv2's thread) */
static __always_inline void decrement_to_zero(__u32 *cell, __u32 by)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		__u32 old = *cell;
		__u32 new = old > by ? old - by : 0;
		if (__sync_val_compare_and_swap(cell, old, new) == old)
			return;
	}
}

static __always_inline __u32 slot_index(__u32 base, __u32 seq, __u32 count_)
{
	/* wire.slot_index: base + seq mod count (ina.p4's identity hash) */
	return base + seq % count_;
}

static __always_inline void ipv4_checksum(struct iphdr *ip)
{
	__u16 *words = (__u16 *)ip;
	__u32 sum = 0;
	ip->check = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += words[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~sum;
}

/* the ECMP member of route_ecmp: ina.p4's HashAlgorithm.crc16 (bmv2: CRC-16/ARC, polynomial 0x8005
   reflected, initial 0, no final xor) of source, destination, protocol and the two ports, modulo ports;
   a byte at a time through the polynomial's table */
static const __u16 crc16_table[256] = {
	0x0000, 0xc0c1, 0xc181, 0x0140, 0xc301, 0x03c0, 0x0280, 0xc241,
	0xc601, 0x06c0, 0x0780, 0xc741, 0x0500, 0xc5c1, 0xc481, 0x0440,
	0xcc01, 0x0cc0, 0x0d80, 0xcd41, 0x0f00, 0xcfc1, 0xce81, 0x0e40,
	0x0a00, 0xcac1, 0xcb81, 0x0b40, 0xc901, 0x09c0, 0x0880, 0xc841,
	0xd801, 0x18c0, 0x1980, 0xd941, 0x1b00, 0xdbc1, 0xda81, 0x1a40,
	0x1e00, 0xdec1, 0xdf81, 0x1f40, 0xdd01, 0x1dc0, 0x1c80, 0xdc41,
	0x1400, 0xd4c1, 0xd581, 0x1540, 0xd701, 0x17c0, 0x1680, 0xd641,
	0xd201, 0x12c0, 0x1380, 0xd341, 0x1100, 0xd1c1, 0xd081, 0x1040,
	0xf001, 0x30c0, 0x3180, 0xf141, 0x3300, 0xf3c1, 0xf281, 0x3240,
	0x3600, 0xf6c1, 0xf781, 0x3740, 0xf501, 0x35c0, 0x3480, 0xf441,
	0x3c00, 0xfcc1, 0xfd81, 0x3d40, 0xff01, 0x3fc0, 0x3e80, 0xfe41,
	0xfa01, 0x3ac0, 0x3b80, 0xfb41, 0x3900, 0xf9c1, 0xf881, 0x3840,
	0x2800, 0xe8c1, 0xe981, 0x2940, 0xeb01, 0x2bc0, 0x2a80, 0xea41,
	0xee01, 0x2ec0, 0x2f80, 0xef41, 0x2d00, 0xedc1, 0xec81, 0x2c40,
	0xe401, 0x24c0, 0x2580, 0xe541, 0x2700, 0xe7c1, 0xe681, 0x2640,
	0x2200, 0xe2c1, 0xe381, 0x2340, 0xe101, 0x21c0, 0x2080, 0xe041,
	0xa001, 0x60c0, 0x6180, 0xa141, 0x6300, 0xa3c1, 0xa281, 0x6240,
	0x6600, 0xa6c1, 0xa781, 0x6740, 0xa501, 0x65c0, 0x6480, 0xa441,
	0x6c00, 0xacc1, 0xad81, 0x6d40, 0xaf01, 0x6fc0, 0x6e80, 0xae41,
	0xaa01, 0x6ac0, 0x6b80, 0xab41, 0x6900, 0xa9c1, 0xa881, 0x6840,
	0x7800, 0xb8c1, 0xb981, 0x7940, 0xbb01, 0x7bc0, 0x7a80, 0xba41,
	0xbe01, 0x7ec0, 0x7f80, 0xbf41, 0x7d00, 0xbdc1, 0xbc81, 0x7c40,
	0xb401, 0x74c0, 0x7580, 0xb541, 0x7700, 0xb7c1, 0xb681, 0x7640,
	0x7200, 0xb2c1, 0xb381, 0x7340, 0xb101, 0x71c0, 0x7080, 0xb041,
	0x5000, 0x90c1, 0x9181, 0x5140, 0x9301, 0x53c0, 0x5280, 0x9241,
	0x9601, 0x56c0, 0x5780, 0x9741, 0x5500, 0x95c1, 0x9481, 0x5440,
	0x9c01, 0x5cc0, 0x5d80, 0x9d41, 0x5f00, 0x9fc1, 0x9e81, 0x5e40,
	0x5a00, 0x9ac1, 0x9b81, 0x5b40, 0x9901, 0x59c0, 0x5880, 0x9841,
	0x8801, 0x48c0, 0x4980, 0x8941, 0x4b00, 0x8bc1, 0x8a81, 0x4a40,
	0x4e00, 0x8ec1, 0x8f81, 0x4f40, 0x8d01, 0x4dc0, 0x4c80, 0x8c41,
	0x4400, 0x84c1, 0x8581, 0x4540, 0x8701, 0x47c0, 0x4680, 0x8641,
	0x8201, 0x42c0, 0x4380, 0x8341, 0x4100, 0x81c1, 0x8081, 0x4040
};

static __always_inline __u32 ecmp_member(struct iphdr *ip, __u16 sport, __u16 dport, __u32 ports)
{
	__u8 bytes[13];
	__u32 crc = 0;
	__builtin_memcpy(bytes, &ip->saddr, 4);
	__builtin_memcpy(bytes + 4, &ip->daddr, 4);
	bytes[8] = ip->protocol;
	bytes[9] = sport >> 8;
	bytes[10] = sport & 0xff;
	bytes[11] = dport >> 8;
	bytes[12] = dport & 0xff;
#pragma unroll
	for (int i = 0; i < 13; i++)
		crc = (crc >> 8) ^ crc16_table[(crc ^ bytes[i]) & 0xff];
	return ports ? crc % ports : 0;
}

static __always_inline int redirect_port(__u32 port, __u32 mark, struct __sk_buff *skb)
{
	__u32 *ifindex = bpf_map_lookup_elem(&port_ifindex, &port);
	if (!ifindex || !*ifindex)
		return TC_ACT_SHOT;
	skb->mark = mark;
	return bpf_redirect(*ifindex, 0);
}

static __always_inline void clone_to_port(struct __sk_buff *skb, __u32 port, __u32 mark)
{
	__u32 *ifindex = bpf_map_lookup_elem(&port_ifindex, &port);
	if (!ifindex || !*ifindex)
		return;
	skb->mark = mark;
	bpf_clone_redirect(skb, *ifindex, 0);
}

static __always_inline struct frame *ina_frame(struct __sk_buff *skb, void **data_end)
{
	void *data = (void *)(long)skb->data;
	struct frame *f = data;
	*data_end = (void *)(long)skb->data_end;
	if ((void *)(f + 1) > *data_end)
		return NULL;
	return f;
}

/* The multicast group a RESULT or a Rina packet is replicated to (ina.p4's meta.mcast_grp; 0: none) */
struct verdict {
	__u32 mcast_grp;
};

/* ------------------------------------------------------------------ Ingress: the slot */

/* The packet's lanes, host order, while its slot works on them: read before the slot's critical section
   and written back after it (a loop over packet bytes of variable length is beyond the verifier's
   patience inside a lock) */
struct lanes { __s32 value[INA_LANES]; };
PERCPU_MAP(lane_scratch, struct lanes, 1);

static __always_inline struct lanes *lanes_load(struct __sk_buff *skb, __u8 elems)
{
	__u32 zero = 0;
	struct lanes *l = bpf_map_lookup_elem(&lane_scratch, &zero);
	__u32 bytes = (__u32)elems * 4;
	if (!l)
		return NULL;
	bytes &= 0x3ff;         /* elems <= INA_LANES: checked when the packet was parsed; for the verifier */
	if (bytes > sizeof(l->value))
		return NULL;
	asm volatile("" : "+r"(bytes));
	if (bytes > sizeof(l->value))
		return NULL;
	if (bytes && bpf_skb_load_bytes(skb, HEADERS_BYTES, l->value, bytes))
		return NULL;
	for (int i = 0; i < INA_LANES; i++)
		l->value[i] = (__s32)bpf_ntohl(l->value[i]);
	return l;
}

static __always_inline void lanes_store(struct __sk_buff *skb, struct lanes *l, __u8 elems)
{
	__u32 bytes = (__u32)elems * 4;
	for (int i = 0; i < INA_LANES; i++)
		l->value[i] = bpf_htonl(l->value[i]);
	asm volatile("" : "+r"(bytes));
	if (bytes && bytes <= sizeof(l->value))
		bpf_skb_store_bytes(skb, HEADERS_BYTES, l->value, bytes, 0);
}

/* The lanes (ina.p4's INA_LANE_SUM, or INA_LANE_SWAP for an eviction; unrolled there, a loop here): a
   valid lane becomes (slot lane & keep_mask) + (packet lane & add_mask), in the slot and the packet;
   claiming a slot zeroes the lanes the packet lacks. Under the slot's lock. */
static __always_inline void slot_lanes(struct lanes *l, struct agg_slot *s, __u32 keep_mask,
				       __u32 add_mask, __u8 claim, __u8 evict, __u8 elems)
{
	for (int i = 0; i < INA_LANES; i++) {
		if (i >= elems) {
			if (claim && !evict)    /* INA_LANE_SWAP leaves the lanes past the packet's alone */
				s->value[i] = 0;
			continue;
		}
		__s32 packet_value = l->value[i];
		__s32 slot_value = s->value[i];
		if (evict) {
			s->value[i] = packet_value;
			l->value[i] = slot_value;
		} else {
			__s32 sum = (__s32)(((__u32)slot_value & keep_mask) + ((__u32)packet_value & add_mask));
			s->value[i] = sum;
			l->value[i] = sum;
		}
	}
}

/* ina.p4's agg_hit branch from the meter on: the slot's read, decision and write under its lock.
   Everything a helper must fetch (table entries, other registers, the meter's colour) was fetched
   before; the lock allows no helper call. */
struct agg_inputs {
	struct aggregate_action act;    /* the ina_filter entry (a copy) */
	__u32 slot;
	__u32 pa_row;
	__u8 pa_hit, pa_aecn, pa_raw, green;
	__u8 esa_hit, evict_hit;
	__u16 esa_priority;
	struct evict_action evict;      /* esa_evict of the slot's holder as read before the lock (a copy) */
	__u16 evict_job, evict_submodel;/* ... the holder it was read for */
};

/* What the slot made of the packet */
#define SLOT_GO_ON 0    /* on to forwarding as it is (bypassed, overflowed: the header rewritten) */
#define SLOT_DROP 1     /* absorbed, or dropped as a duplicate */
#define SLOT_GACK 2     /* absorbed; back to its sender as its GACK */
#define SLOT_EMIT 3     /* leaves as the aggregate (emit_rewrite) */
#define SLOT_SHADOW 4   /* leaves as the copy's RESULT */
#define SLOT_EVICT 5    /* leaves as the evicted partial */
struct emit {
	__u8 verdict, flush, flush_to_ps, gack_clone, counted;
	__u8 release, slot_was_held, slot_held, claim, evict, elems;
	__u32 keep_mask, add_mask;
	__u16 new_count, held_job, held_submodel, evicted_count;
	__u32 held_iteration, held_seq;
	__u64 new_bitmap, held_bitmap;
};

/* The decision's write to the slot, under its lock: the lanes, then the count and bitmap (freed on
   release) */
static __always_inline void slot_finish(struct agg_slot *s, struct lanes *l, struct emit *out, __u8 pa_hit,
					__u32 *row_used)
{
	slot_lanes(l, s, out->keep_mask, out->add_mask, out->claim, out->evict, out->elems);
	if (out->release) {
		s->count = 0;
		s->bitmap = 0;
		out->slot_held = 0;
	} else {
		s->count = out->new_count;
		s->bitmap = out->new_bitmap;
		out->slot_held = out->new_count != 0;
	}
	/* a PA-ATP job's agg_used follows its slot from free to held and back, under the slot's lock as a
	   RESULT's release (result_packet) changes it */
	if (pa_hit && out->slot_held != out->slot_was_held) {
		if (out->slot_held)
			__sync_fetch_and_add(row_used, 1);
		else
			decrement_to_zero(row_used, 1);
	}
}

__noinline int slot_update(struct __sk_buff *skb, struct agg_inputs *in, struct emit *out)
{
	void *data_end;
	if (!out || !in)
		return 0;
	struct aggregate_action *act = &in->act;
	struct frame *f = ina_frame(skb, &data_end);
	__u32 zero = 0, slot = in->slot, row = in->pa_row;
	__u32 cell_index;
	if (!f)
		return 0;
	cell_index = row * INA_PA_SEQS + (bpf_ntohl(f->ina.seq) & (INA_PA_SEQS - 1));
	struct agg_slot *s = bpf_map_lookup_elem(&agg_slots, &slot);
	struct stats *stats = bpf_map_lookup_elem(&ina_stats, &zero);
	__u32 *pa_cell = bpf_map_lookup_elem(&pa_overflow, &cell_index);
	__u32 *row_overflowed = bpf_map_lookup_elem(&pa_overflowed, &row);
	__u32 *row_used = bpf_map_lookup_elem(&agg_used, &row);
	if (!s || !stats || !pa_cell || !row_overflowed || !row_used)
		return 0;
	struct lanes *l = lanes_load(skb, f->ina.elems);
	f = ina_frame(skb, &data_end);
	if (!f || !l)
		return 0;
	struct ina_hdr *h = &f->ina;
	__u16 job = bpf_ntohs(h->job), flags = bpf_ntohs(h->flags);
	__u16 fanin = bpf_ntohs(h->fanin), pcount = bpf_ntohs(h->count);
	__u32 iteration = bpf_ntohl(h->iteration), seq = bpf_ntohl(h->seq);
	__u64 bitmap = bpf_be64_to_cpu(h->bitmap);
	__u8 elems = h->elems;
	__u32 release = act->release_mode;
	__u16 held_count, held_job, held_submodel = 0, evicted_count = 0, new_count = 0;
	__u32 held_iteration, held_seq;
	__u64 held_bitmap = 0, new_bitmap = 0;
	__u32 keep_mask = 0, add_mask = 0;
	__u8 slot_was_held = 0, go_on = 1, overflow = 0, evict = 0, claim = 0;
	__u8 counted = 0, emit = 0, flush = 0, flush_to_ps = 0, shadow_answer = 0;

	bpf_spin_lock(&s->lock);
	held_count = s->count;
	held_job = s->job;
	held_iteration = s->iteration;
	held_seq = s->seq;
	if (held_count != 0)
		slot_was_held = 1;
	if ((held_job == job || held_job == 0) && iteration > held_iteration &&
	    iteration - held_iteration > MAX_ITERATION_LEAD) {
		__sync_fetch_and_add(&stats->cell[ST_LEAD_BYPASSED], 1);
		f->ip.daddr = act->bypass_dst;
		f->udp.check = 0;
		go_on = 0;
	} else if (held_count != 0) {
		if (release == RELEASE_SHADOW && held_job == job &&
		    (held_iteration < iteration || (held_iteration == iteration && held_seq < seq))) {
			__sync_fetch_and_add(&stats->cell[ST_STALE_RECLAIMED], 1);
			held_count = 0;
		} else if (held_job != job || held_iteration > iteration ||
			   (held_seq != seq && held_iteration >= iteration)) {
			if ((flags & FLAG_RETX) == 0 && !in->pa_hit && pcount < fanin && in->esa_hit) {
				struct evict_action *e = &in->evict;
				held_submodel = s->submodel;
				/* the holder's esa_evict entry was looked up before the lock: it counts only
				   if the slot still holds that (job, sub-model) */
				if (in->evict_hit && in->evict_job == held_job && in->evict_submodel == held_submodel &&
				    s->elems == elems && held_count < e->fanin &&
				    (in->esa_priority > e->priority ||
				     (in->esa_priority == e->priority && held_job == job &&
				      held_iteration == iteration && seq < held_seq)))
					evict = 1;
			}
			if (evict) {
				__sync_fetch_and_add(&stats->cell[ST_ESA_EVICTED], 1);
				s->collided_job = held_job;
				s->collided_iteration = held_iteration;
				s->collided_seq = held_seq;
				held_bitmap = s->bitmap;
				evicted_count = held_count;
				held_count = 0;
			} else {
				__sync_fetch_and_add(&stats->cell[ST_COLLISION_BYPASSED], 1);
				s->collided_job = job;
				s->collided_iteration = iteration;
				s->collided_seq = seq;
				flags |= FLAG_COLLISION;
				h->flags = bpf_htons(flags);
				overflow = 1;
				go_on = 0;
				if (in->pa_hit && in->pa_aecn) {
					__sync_fetch_and_add(pa_cell, 1);
					__sync_fetch_and_add(row_overflowed, 1);
				}
			}
		} else if (held_iteration < iteration) {
			__sync_fetch_and_add(&stats->cell[ST_STALE_RECLAIMED], 1);
			held_count = 0;
		}
	}
	if (go_on && held_count == 0 &&
	    (((flags & FLAG_RETX) && release != RELEASE_SHADOW && release != RELEASE_HOLD) ||
	     (held_job == job && held_iteration == iteration && held_seq == seq))) {
		__sync_fetch_and_add(&stats->cell[ST_RETX_BYPASSED], 1);
		if (flags & FLAG_RETX) {
			f->ip.daddr = act->bypass_dst;
			f->udp.check = 0;
		} else {
			overflow = 1;
		}
		go_on = 0;
	}
	if (go_on && held_count == 0 && !in->pa_hit && release != RELEASE_SHADOW) {
		if (s->collided_job == job && s->collided_iteration == iteration && s->collided_seq == seq) {
			__sync_fetch_and_add(&stats->cell[ST_OVERFLOW_FOLLOWED], 1);
			overflow = 1;
			go_on = 0;
		}
	}
	if (go_on && held_count == 0 && in->pa_hit && in->pa_aecn && *pa_cell != 0) {
		__sync_fetch_and_add(&stats->cell[ST_OVERFLOW_FOLLOWED], 1);
		__sync_fetch_and_add(pa_cell, 1);
		__sync_fetch_and_add(row_overflowed, 1);
		overflow = 1;
		go_on = 0;
	}
	if (go_on && !slot_was_held && !in->green) {
		__sync_fetch_and_add(&stats->cell[ST_CAPACITY_BYPASSED], 1);
		s->job = job;
		s->iteration = iteration;
		s->seq = seq;
		flags |= FLAG_CAPACITY;
		h->flags = bpf_htons(flags);
		overflow = 1;
		go_on = 0;
	}
	if (overflow) {
		f->ip.daddr = act->overflow_dst;
		f->udp.check = 0;
		if (act->overflow_slot_count != 0) {
			h->agg_node = bpf_htons(act->overflow_agg_node);
			h->fanin = bpf_htons(act->overflow_fanin);
			h->slot = bpf_htonl(slot_index(act->overflow_slot_base, seq, act->overflow_slot_count));
		}
	}
	if (go_on && held_count != 0 && (flags & FLAG_RETX) && release != RELEASE_SHADOW &&
	    release != RELEASE_HOLD && !in->pa_hit) {
		if ((s->bitmap & bitmap) == 0) {
			__sync_fetch_and_add(&stats->cell[ST_RETX_BYPASSED], 1);
			f->ip.daddr = act->bypass_dst;
			f->udp.check = 0;
			go_on = 0;
		}
	}
	if (!go_on) {
		bpf_spin_unlock(&s->lock);
		out->verdict = SLOT_GO_ON;
		return 0;
	}
	if (held_count == 0) {
		claim = 1;
		keep_mask = 0;
		add_mask = 0xFFFFFFFF;
		new_bitmap = bitmap;
		new_count = pcount;
		counted = 1;
		s->job = job;
		s->iteration = iteration;
		s->seq = seq;
		s->resulted = 0;
		s->submodel = bpf_ntohs(h->submodel);
		s->elems = elems;
	} else {
		held_bitmap = s->bitmap;
		if (held_bitmap & bitmap) {
			__sync_fetch_and_add(&stats->cell[ST_DUPLICATE_DROPPED], 1);
			if ((flags & FLAG_RETX) == 0 || release == RELEASE_HOLD) {
				if (flags & FLAG_RETX)
					__sync_fetch_and_add(&stats->cell[ST_RETX_HELD], 1);
				bpf_spin_unlock(&s->lock);
				out->verdict = SLOT_DROP;
				return 0;
			}
			keep_mask = 0xFFFFFFFF;
			add_mask = 0;
			new_bitmap = held_bitmap;
			new_count = held_count;
			if (release == RELEASE_SHADOW && held_count >= fanin && s->resulted) {
				shadow_answer = 1;
			} else {
				__sync_fetch_and_add(&stats->cell[ST_PARTIAL_FLUSHED], 1);
				emit = 1;
				flush = 1;
				if (held_count < fanin)
					flush_to_ps = 1;
			}
		} else {
			keep_mask = 0xFFFFFFFF;
			add_mask = 0xFFFFFFFF;
			new_bitmap = held_bitmap | bitmap;
			new_count = held_count + pcount;
			counted = 1;
		}
	}
	if (counted && new_count >= fanin)
		emit = 1;
	/* Everything the rest needs goes to *out first: the verifier does not follow values through
	   memory, so the lanes' loop below is checked once, not once per decision that led to it */
	out->counted = counted;
	out->new_count = new_count;
	out->new_bitmap = new_bitmap;
	out->flush = flush;
	out->flush_to_ps = flush_to_ps;
	out->held_job = held_job;
	out->held_submodel = held_submodel;
	out->held_iteration = held_iteration;
	out->held_seq = held_seq;
	out->held_bitmap = held_bitmap;
	out->evicted_count = evicted_count;
	out->release = emit && (release == RELEASE_ON_EMIT || release == RELEASE_HOLD || flush_to_ps);
	out->slot_was_held = slot_was_held;
	out->keep_mask = keep_mask;
	out->add_mask = add_mask;
	out->claim = claim;
	out->evict = evict;
	out->elems = elems;
	if (shadow_answer)
		out->verdict = SLOT_SHADOW;
	else if (evict)
		out->verdict = SLOT_EVICT;
	else if (emit)
		out->verdict = SLOT_EMIT;
	else if (in->pa_raw)
		out->verdict = SLOT_GACK;
	else
		out->verdict = SLOT_DROP;
	out->gack_clone = emit && in->pa_raw && counted;
	slot_finish(s, l, out, in->pa_hit, row_used);
	bpf_spin_unlock(&s->lock);
	lanes_store(skb, l, out->elems);
	return 0;
}

/* ina.p4's emit: the packet leaves as the aggregate, toward the next level (a flushed partial: toward
   the PS) */
static __always_inline void emit_rewrite(struct frame *f, struct aggregate_action *act, struct emit *e)
{
	struct ina_hdr *h = &f->ina;
	__u16 flags = bpf_ntohs(h->flags);
	__u8 level = h->level;
	if (!e->flush)
		flags = (flags & ~FLAG_RETX) | FLAG_DATA;
	else
		flags |= FLAG_DATA;
	h->flags = bpf_htons(flags);
	if (level != 255)
		h->level = level + 1;
	h->count = bpf_htons(e->new_count);
	h->bitmap = bpf_cpu_to_be64(e->new_bitmap);
	f->ip.saddr = act->switch_addr;
	f->udp.check = 0;
	if (e->flush_to_ps) {
		f->ip.daddr = act->bypass_dst;
	} else {
		__u32 seq = bpf_ntohl(h->seq);
		h->agg_node = bpf_htons(act->next_agg_node);
		h->fanin = bpf_htons(act->next_fanin);
		if (act->next_slot_count == 0)
			h->slot = bpf_htonl(act->next_slot_base);
		else
			h->slot = bpf_htonl(slot_index(act->next_slot_base, seq, act->next_slot_count));
		f->ip.daddr = act->next_dst;
	}
}

/* ------------------------------------------------------------------ Ingress: Rina's rack */

/* ina.p4's rina_hit branch (Rina §IV-B, §V-1): the rack's shards of one fragment summed in the job's
   contiguous slots. Returns 1 when the packet goes on (a sum, or a pull, replicated to v->mcast_grp). */
static __always_inline int rina_slot(struct __sk_buff *skb, struct agg_slot *s, struct rina_action *act,
				     struct verdict *v, struct stats *stats)
{
	void *data_end;
	struct frame *f = ina_frame(skb, &data_end);
	if (!f)
		return 0;
	struct lanes *l = lanes_load(skb, f->ina.elems);
	f = ina_frame(skb, &data_end);
	if (!f || !l)
		return 0;
	struct ina_hdr *h = &f->ina;
	__u8 elems = h->elems;
	__u16 job = bpf_ntohs(h->job), flags = bpf_ntohs(h->flags);
	__u16 fanin = bpf_ntohs(h->fanin), pcount = bpf_ntohs(h->count);
	__u32 iteration = bpf_ntohl(h->iteration), seq = bpf_ntohl(h->seq);
	__u64 bitmap = bpf_be64_to_cpu(h->bitmap);
	__u16 new_count = 0;
	__u64 new_bitmap = 0;
	__u32 keep_mask = 0, add_mask = 0;
	__u8 claim = 0, emit = 0, pull = 0;

	bpf_spin_lock(&s->lock);
	if (s->count != 0 && s->job == job && s->iteration == iteration && s->seq == seq) {
		if (s->bitmap & bitmap) {
			/* a shard the slot has: dropped, unless it is the agent's resent task */
			__sync_fetch_and_add(&stats->cell[ST_DUPLICATE_DROPPED], 1);
			if ((flags & (FLAG_TASK | FLAG_RETX)) != (FLAG_TASK | FLAG_RETX)) {
				bpf_spin_unlock(&s->lock);
				return 0;
			}
			keep_mask = 0xFFFFFFFF;
			new_bitmap = s->bitmap;
			new_count = s->count;
			if (s->count >= fanin) {
				emit = 1;
				__sync_fetch_and_add(&stats->cell[ST_RINA_REEMITTED], 1);
			} else {
				pull = 1;       /* the missing shards, pulled again */
			}
		} else {
			keep_mask = 0xFFFFFFFF;
			add_mask = 0xFFFFFFFF;
			new_bitmap = s->bitmap | bitmap;
			new_count = s->count + pcount;
			__sync_fetch_and_add(&stats->cell[ST_AGGREGATED], 1);
			emit = new_count >= fanin;
		}
	} else if ((flags & FLAG_TASK) &&
		   (s->count == 0 || s->job != job || iteration > s->iteration ||
		    (iteration == s->iteration && seq > s->seq))) {
		/* a task newer than what the slot holds claims it, and is pulled */
		if (s->count != 0 && s->job == job)
			__sync_fetch_and_add(&stats->cell[ST_STALE_RECLAIMED], 1);
		claim = 1;
		add_mask = 0xFFFFFFFF;
		new_bitmap = bitmap;
		new_count = pcount;
		__sync_fetch_and_add(&stats->cell[ST_AGGREGATED], 1);
		emit = new_count >= fanin;
		pull = !emit;
		s->job = job;
		s->iteration = iteration;
		s->seq = seq;
	} else {
		bpf_spin_unlock(&s->lock);
		__sync_fetch_and_add(&stats->cell[ST_RINA_STALE_DROPPED], 1);
		return 0;
	}
	slot_lanes(l, s, keep_mask, add_mask, claim, 0, elems);
	s->count = new_count;
	s->bitmap = new_bitmap;
	bpf_spin_unlock(&s->lock);
	lanes_store(skb, l, elems);
	f = ina_frame(skb, &data_end);
	if (!f)
		return 0;
	h = &f->ina;

	if (emit) {
		/* the rack's sum, from this switch, on to the next member; a finished chunk (GATHER) to every
		   worker of the rack as well */
		__sync_fetch_and_add(&stats->cell[ST_EMITTED], 1);
		h->flags = bpf_htons(FLAG_DATA | (flags & FLAG_GATHER));
		h->level = 1;
		h->agg_node = 0;
		h->count = bpf_htons(new_count);
		h->bitmap = bpf_cpu_to_be64(new_bitmap);
		f->ip.saddr = act->switch_addr;
		f->udp.check = 0;
		if (flags & FLAG_GATHER)
			v->mcast_grp = act->gather_grp;
		return 1;
	}
	if (pull) {
		/* the task's pull (a claim, or a resent task of an incomplete slot): its header to the rack's
		   other workers */
		h->flags = bpf_htons(FLAG_PULL | (flags & FLAG_GATHER));
		f->udp.check = 0;
		v->mcast_grp = act->pull_grp;
		__sync_fetch_and_add(&stats->cell[ST_RINA_PULLED], 1);
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------ Ingress: RESULTs */

/* ina.p4's RESULT branch: PA-ATP's AECN, then ina_result (release the slot, mark a shadow copy
   resulted, the multicast group) */
static __always_inline void result_packet(struct frame *f, struct pa_action *pa, struct verdict *v)
{
	struct ina_hdr *h = &f->ina;
	__u16 job = bpf_ntohs(h->job);
	__u32 iteration = bpf_ntohl(h->iteration), seq = bpf_ntohl(h->seq);

	if (pa && pa->aecn) {
		__u32 row = pa->pa_index;
		__u32 cell_index = row * INA_PA_SEQS + (seq & (INA_PA_SEQS - 1));
		__u32 *threshold = bpf_map_lookup_elem(&aecn_threshold, &row);
		__u32 *used = bpf_map_lookup_elem(&agg_used, &row);
		__u32 *overflowed = bpf_map_lookup_elem(&pa_overflowed, &row);
		__u32 *cell = bpf_map_lookup_elem(&pa_overflow, &cell_index);
		if (threshold && used && overflowed && cell) {
			__u32 outstanding = *overflowed;
			if (*threshold != 0 && *used + outstanding > *threshold) {
				h->flags = bpf_htons(bpf_ntohs(h->flags) | FLAG_AECN);
				f->udp.check = 0;
				count(ST_AECN_MARKED);
			}
			__u32 in_cell = __sync_lock_test_and_set(cell, 0);
			if (in_cell != 0)
				decrement_to_zero(overflowed, in_cell);
		}
	}
	struct job_dst_key key = {.job = job, .dst = f->ip.daddr};
	struct result_action *act = bpf_map_lookup_elem(&ina_result, &key);
	if (!act)
		return;
	v->mcast_grp = act->mcast_grp;
	if (act->action == ACT_RELEASE && act->slot_count != 0) {
		__u32 index = slot_index(act->slot_base, seq, act->slot_count);
		struct agg_slot *s = bpf_map_lookup_elem(&agg_slots, &index);
		__u32 row = pa ? pa->pa_index : 0;
		__u32 *used = pa ? bpf_map_lookup_elem(&agg_used, &row) : NULL;
		__u8 released = 0;
		if (!s)
			return;
		bpf_spin_lock(&s->lock);
		if (s->count != 0 && s->job == job && s->iteration == iteration && s->seq == seq) {
			s->count = 0;
			s->bitmap = 0;
			released = 1;
			if (used)       /* under the slot's lock, as slot_finish counts it up */
				decrement_to_zero(used, 1);
		}
		bpf_spin_unlock(&s->lock);
		if (released)
			count(ST_RESULT_RELEASED);
	} else if (act->action == ACT_SHADOW && act->slot_count != 0) {
		/* SwitchML: copy 0 or 1 of pool slot seq mod pool (slot_count holds the pool) */
		__u32 first = act->slot_base + 2 * (seq % act->slot_count);
		for (__u32 copy = 0; copy < 2; copy++) {
			__u32 index = first + copy;
			struct agg_slot *s = bpf_map_lookup_elem(&agg_slots, &index);
			__u8 found = 0;
			if (!s)
				break;
			bpf_spin_lock(&s->lock);
			if (s->count != 0 && s->job == job && s->iteration == iteration && s->seq == seq) {
				s->resulted = 1;
				found = 1;
			}
			bpf_spin_unlock(&s->lock);
			if (found)
				break;
		}
	}
}

/* ------------------------------------------------------------------ Ingress */

static __always_inline __u8 meter_green(void)
{
	__u32 zero = 0;
	struct meter *m = bpf_map_lookup_elem(&agg_capacity, &zero);
	__u64 now = bpf_ktime_get_ns();
	__u8 green = 1;
	if (!m)
		return 1;
	bpf_spin_lock(&m->lock);
	if (m->rate_milli != 0) {
		__u64 cap = m->burst * TOKEN_PICO;
		__u64 elapsed = now - m->last_ns;
		__u64 tokens = now < m->last_ns || elapsed > METER_REFILL_NS || elapsed >= cap / m->rate_milli ?
			       cap : m->tokens_pico + elapsed * m->rate_milli;
		if (tokens > cap)
			tokens = cap;
		m->last_ns = now;
		if (tokens >= TOKEN_PICO)
			tokens -= TOKEN_PICO;
		else
			green = 0;
		m->tokens_pico = tokens;
	}
	bpf_spin_unlock(&m->lock);
	return green;
}

/* PA-ATP's progress (§IV, Fig. 7): a raw gradient of an opted-in job moves its worker's S_n to its seq and
   S_sum by the difference, and carries S_sum in its progress field */
static __always_inline void pa_progress(struct ina_hdr *h, __u32 row, __u64 bitmap)
{
	/* the index of the one-hot bitmap's bit: the worker (ina.p4 halves the search the same way) */
	__u32 worker = 0;
	if (bitmap & 0xFFFFFFFF00000000ull) { worker += 32; bitmap >>= 32; }
	if (bitmap & 0xFFFF0000ull) { worker += 16; bitmap >>= 16; }
	if (bitmap & 0xFF00ull) { worker += 8; bitmap >>= 8; }
	if (bitmap & 0xF0ull) { worker += 4; bitmap >>= 4; }
	if (bitmap & 0xCull) { worker += 2; bitmap >>= 2; }
	if (bitmap & 0x2ull) worker += 1;
	__u32 index = row * INA_PA_WORKERS + worker;
	__u32 seq = bpf_ntohl(h->seq);
	__u32 *last = bpf_map_lookup_elem(&pa_seq, &index);
	__u32 *sum = bpf_map_lookup_elem(&pa_seq_sum, &row);
	if (!last || !sum)
		return;
	__u32 previous = __sync_lock_test_and_set(last, seq);
	__u32 progress = __sync_fetch_and_add(sum, seq - previous) + (seq - previous);
	h->progress = bpf_htonl(progress);
}

__noinline int forward(struct __sk_buff *skb, __u32 mark)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	if ((void *)(ip + 1) > data_end)
		return TC_ACT_SHOT;
	struct route_key rkey = {.src = ip->saddr, .dst = ip->daddr};
	struct forward_action *act = bpf_map_lookup_elem(&route, &rkey);
	if (!act) {
		struct lpm_key lkey = {.prefixlen = 32, .addr = ip->daddr};
		act = bpf_map_lookup_elem(&ipv4_lpm, &lkey);
	}
	if (!act || act->action == ACT_DROP || ip->ttl <= 1) {
		count(ST_NO_ROUTE_DROPPED);
		return TC_ACT_SHOT;
	}
	__u32 port = act->port;
	if (act->action == ACT_ECMP) {
		__u16 sport = 0, dport = 0;
		if (ip->protocol == IPPROTO_TCP_ || ip->protocol == IPPROTO_UDP_) {
			__be16 *ports = (void *)(ip + 1);
			if ((void *)(ports + 2) <= data_end) {
				sport = bpf_ntohs(ports[0]);
				dport = bpf_ntohs(ports[1]);
			}
		}
		port += ecmp_member(ip, sport, dport, act->ports);
	}
	__builtin_memcpy(eth->h_dest, act->mac, 6);
	ip->ttl -= 1;
	count(ST_FORWARDED);
	return redirect_port(port, mark, skb);
}

__noinline int multicast(struct __sk_buff *skb, __u32 group_id, __u32 ingress_port)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct frame *f = data;
	if ((void *)(f + 1) > data_end)
		return TC_ACT_SHOT;
	if (f->ip.ttl <= 1) {
		count(ST_NO_ROUTE_DROPPED);
		return TC_ACT_SHOT;
	}
	f->ip.ttl -= 1;
	__u8 gather = (bpf_ntohs(f->ina.flags) & FLAG_GATHER) != 0;
	count(ST_MULTICAST);
	struct mc_group *group = bpf_map_lookup_elem(&mc_groups, &group_id);
	if (!group)
		return TC_ACT_SHOT;
	for (__u32 i = 0; i < INA_GROUP_PORTS; i++) {
		if (i >= group->count)
			break;
		__u32 port = group->ports[i];
		/* ina.p4's Egress: a copy never goes back out of its ingress port, but for a Rina rack's
		   finished chunk */
		if (port == ingress_port && !gather)
			continue;
		clone_to_port(skb, port, MARK_INA | MARK_REPLICA | ingress_port);
	}
	return TC_ACT_SHOT;     /* the copies left; the original ends here */
}

/* What the INA part of Ingress decided: the packet is dropped (absorbed, or dropped and counted), goes
   back out of its ingress port as its GACK, goes on to forwarding, or is replicated to a group (> 0) */
#define GO_DROP -1
#define GO_GACK -2
#define GO_FORWARD 0


/* ina.p4's RESULT branch */
__noinline int ina_result_path(struct __sk_buff *skb)
{
	void *data_end;
	struct frame *f = ina_frame(skb, &data_end);
	struct verdict v = {};
	if (!f)
		return GO_DROP;
	__u32 job = bpf_ntohs(f->ina.job);
	struct pa_action *pa = bpf_map_lookup_elem(&pa_job, &job);
	result_packet(f, pa, &v);
	return v.mcast_grp;
}

/* ina.p4's rina_hit branch */
__noinline int ina_rina_path(struct __sk_buff *skb)
{
	void *data_end;
	struct frame *f = ina_frame(skb, &data_end);
	struct verdict v = {};
	if (!f)
		return GO_DROP;
	struct rack_key rkey = {.job = bpf_ntohs(f->ina.job), .agg_node = bpf_ntohs(f->ina.agg_node)};
	struct rina_action *rina = bpf_map_lookup_elem(&rina_rack, &rkey);
	if (!rina)
		return GO_DROP;
	if (rina->slot_count == 0) {
		count(ST_SLOT_RANGE_DROPPED);
		return GO_DROP;
	}
	__u32 index = slot_index(rina->slot_base, bpf_ntohl(f->ina.seq), rina->slot_count);
	struct agg_slot *s = index < INA_SLOTS ? bpf_map_lookup_elem(&agg_slots, &index) : NULL;
	if (!s) {
		count(ST_SLOT_RANGE_DROPPED);
		return GO_DROP;
	}
	__u32 zero = 0;
	struct stats *stats = bpf_map_lookup_elem(&ina_stats, &zero);
	if (!stats || !rina_slot(skb, s, rina, &v, stats))
		return GO_DROP;
	return v.mcast_grp;
}

/* ina_aggregate_path's inputs and outputs of slot_update: per CPU, not on the stack (three calls deep, the
   stack's 512 bytes would not hold them) */
struct agg_scratch { struct agg_inputs in; struct emit out; };
PERCPU_MAP(agg_scratch, struct agg_scratch, 1);

/* ina.p4's agg_hit branch: the entries and registers the slot's critical section needs, the section
   (slot_update), then what the packet leaves as */
__noinline int ina_aggregate_path(struct __sk_buff *skb, __u32 ingress_port)
{
	void *data_end;
	struct frame *f = ina_frame(skb, &data_end);
	__u32 zero = 0;
	struct agg_scratch *scratch = bpf_map_lookup_elem(&agg_scratch, &zero);
	if (!f || !scratch)
		return GO_DROP;
	struct agg_inputs *in = &scratch->in;
	struct emit *e = &scratch->out;
	__builtin_memset(scratch, 0, sizeof(*scratch));
	__u32 job = bpf_ntohs(f->ina.job);
	__u16 flags = bpf_ntohs(f->ina.flags);
	struct filter_key fkey = {.job = job, .agg_node = bpf_ntohs(f->ina.agg_node),
				  .submodel = bpf_ntohs(f->ina.submodel)};
	struct aggregate_action *agg = bpf_map_lookup_elem(&ina_filter, &fkey);
	if (!agg)
		return GO_FORWARD;
	__u32 index = bpf_ntohl(f->ina.slot);
	if (index < agg->slot_base || index - agg->slot_base >= agg->slot_count || index >= INA_SLOTS) {
		count(ST_SLOT_RANGE_DROPPED);
		return GO_DROP;
	}
	struct agg_slot *s = bpf_map_lookup_elem(&agg_slots, &index);
	if (!s) {
		count(ST_SLOT_RANGE_DROPPED);
		return GO_DROP;
	}
	in->act = *agg;
	in->slot = index;
	struct pa_action *pa = bpf_map_lookup_elem(&pa_job, &job);
	__u64 bitmap = bpf_be64_to_cpu(f->ina.bitmap);
	if (pa) {
		in->pa_row = pa->pa_index < INA_PA_JOBS ? pa->pa_index : 0;
		in->pa_hit = 1;
		in->pa_aecn = pa->aecn != 0;
		if (f->ina.level == 0 && bitmap != 0 && (bitmap & (bitmap - 1)) == 0) {
			in->pa_raw = 1;
			pa_progress(&f->ina, in->pa_row, bitmap);
		}
	}
	in->green = meter_green();
	if ((flags & FLAG_RETX) == 0 && !pa) {
		__u32 *priority = bpf_map_lookup_elem(&esa_job, &job);
		if (priority) {
			/* the holder's esa_evict entry, as the slot holds it now (checked again under the lock) */
			struct evict_key ekey = {.job = s->job, .submodel = s->submodel};
			struct evict_action *evict = bpf_map_lookup_elem(&esa_evict, &ekey);
			in->esa_hit = 1;
			in->esa_priority = *priority;
			in->evict_job = ekey.job;
			in->evict_submodel = ekey.submodel;
			if (evict) {
				in->evict_hit = 1;
				in->evict = *evict;
			}
		}
	}
	slot_update(skb, in, e);
	f = ina_frame(skb, &data_end);
	if (!f)
		return GO_DROP;
	struct ina_hdr *h = &f->ina;
	if (e->counted)
		count(ST_AGGREGATED);
	switch (e->verdict) {
	case SLOT_DROP:
		return GO_DROP;
	case SLOT_GACK:
		count(ST_GACKED);
		return GO_GACK;
	case SLOT_SHADOW: {
		/* SwitchML: the copy's RESULT, from this switch back to the sender */
		__be32 src = f->ip.saddr;
		count(ST_SHADOW_ANSWERED);
		h->flags = bpf_htons(FLAG_RESULT);
		h->count = bpf_htons(e->new_count);
		h->bitmap = bpf_cpu_to_be64(e->new_bitmap);
		f->ip.daddr = src;
		f->ip.saddr = agg->switch_addr;
		f->udp.check = 0;
		return GO_FORWARD;
	}
	case SLOT_EVICT: {
		/* ESA: the evicted partial, from this switch, toward its holder's overflow target */
		__u8 level = h->level;
		h->job = bpf_htons(e->held_job);
		h->flags = bpf_htons(FLAG_DATA | FLAG_EVICTED);
		if (level != 255)
			h->level = level + 1;
		h->submodel = bpf_htons(e->held_submodel);
		h->iteration = bpf_htonl(e->held_iteration);
		h->seq = bpf_htonl(e->held_seq);
		h->count = bpf_htons(e->evicted_count);
		h->bitmap = bpf_cpu_to_be64(e->held_bitmap);
		f->ip.saddr = agg->switch_addr;
		f->ip.daddr = in->evict.overflow_dst;
		f->udp.check = 0;
		if (in->evict.overflow_slot_count != 0) {
			h->agg_node = bpf_htons(in->evict.overflow_agg_node);
			h->fanin = bpf_htons(in->evict.overflow_fanin);
			h->slot = bpf_htonl(slot_index(in->evict.overflow_slot_base, e->held_seq,
						       in->evict.overflow_slot_count));
		}
		return GO_FORWARD;
	}
	case SLOT_EMIT:
		count(ST_EMITTED);
		if (e->gack_clone) {
			/* PA-ATP: the completing gradient's GACK, an ingress clone of it as it arrived (its
			   lanes summed, which the GACK drops), to its session's port: the ingress port */
			__u32 session = GACK_SESSION_BASE + ingress_port;
			__u32 *to = bpf_map_lookup_elem(&mirror_sessions, &session);
			count(ST_GACKED);
			ipv4_checksum((struct iphdr *)(f->eth.h_dest + sizeof(struct ethhdr)));
			if (to)
				clone_to_port(skb, *to, MARK_INA | MARK_GACK | MARK_CLONE | ingress_port);
			f = ina_frame(skb, &data_end);
			if (!f)
				return GO_DROP;
		}
		emit_rewrite(f, &in->act, e);
		return GO_FORWARD;
	}
	return GO_FORWARD;
}

/* rina_gather: a finished chunk for a Rina rack's agent, to the whole rack */
__noinline int ina_gather_group(struct __sk_buff *skb)
{
	void *data_end;
	struct frame *f = ina_frame(skb, &data_end);
	if (!f)
		return GO_FORWARD;
	struct job_dst_key gkey = {.job = bpf_ntohs(f->ina.job), .dst = f->ip.daddr};
	struct result_action *g = bpf_map_lookup_elem(&rina_gather, &gkey);
	return g ? g->mcast_grp : GO_FORWARD;
}

SEC("tc")
int ina_ingress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u64 *started = bpf_map_lookup_elem(&ingress_started, &zero);
	if (started)
		*started = bpf_ktime_get_ns();
	__u32 ifindex = skb->ifindex;
	__u32 *port_of = bpf_map_lookup_elem(&ifindex_port, &ifindex);
	if (!port_of)
		return TC_ACT_SHOT;
	__u32 ingress_port = *port_of & MARK_PORT_MASK;
	__u32 mark = MARK_INA | ingress_port;
	skb->mark = 0;
	bpf_skb_pull_data(skb, skb->len);

	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_SHOT;
	if (ip->version != 4 || ip->ihl != 5)
		return TC_ACT_SHOT;
	struct udphdr *udp = (void *)(ip + 1);
	if (ip->protocol != IPPROTO_UDP_ || (void *)(udp + 1) > data_end || udp->dest != bpf_htons(INA_UDP_PORT))
		return forward(skb, mark);

	struct frame *f = data;
	if ((void *)(f + 1) > data_end || f->ina.elems > INA_LANES ||
	    (void *)(f + 1) + 4 * (__u32)f->ina.elems > data_end) {
		count(ST_MALFORMED_DROPPED);
		return TC_ACT_SHOT;
	}
	count(ST_INA_RX);
	__u16 flags = bpf_ntohs(f->ina.flags);
	int go = GO_FORWARD;
	if (flags & FLAG_RESULT) {
		go = ina_result_path(skb);
	} else if ((flags & FLAG_GACK) == 0) {
		struct rack_key rkey = {.job = bpf_ntohs(f->ina.job), .agg_node = bpf_ntohs(f->ina.agg_node)};
		if ((flags & FLAG_DATA) && bpf_map_lookup_elem(&rina_rack, &rkey)) {
			go = ina_rina_path(skb);
		} else {
			struct filter_key fkey = {.job = rkey.job, .agg_node = rkey.agg_node,
						  .submodel = bpf_ntohs(f->ina.submodel)};
			if (bpf_map_lookup_elem(&ina_filter, &fkey))
				go = ina_aggregate_path(skb, ingress_port);
			else if (flags & FLAG_GATHER)
				go = ina_gather_group(skb);
		}
	}
	if (go == GO_DROP)
		return TC_ACT_SHOT;
	if (go == GO_GACK)
		return redirect_port(ingress_port, mark | MARK_GACK, skb);
	if (go > 0)
		return multicast(skb, go, ingress_port);
	return forward(skb, mark);
}

/* ------------------------------------------------------------------ Egress */

/* The traffic manager: the frame's place in its port's queue. Returns the frames ahead of it (bmv2's
   enq_qdepth), or -1 when the queue is full (tail drop). */
static __always_inline int enqueue(struct __sk_buff *skb, __u32 port, __u64 now)
{
	struct port_queue *q = bpf_map_lookup_elem(&port_queue, &port);
	int ahead;
	if (!q)
		return 0;
	bpf_spin_lock(&q->lock);
	if (q->rate_bps == 0 || q->depth == 0) {
		bpf_spin_unlock(&q->lock);
		return 0;
	}
	for (int i = 0; i < INA_QUEUE_RING; i++) {
		if (q->head == q->tail || q->ring[q->head & (INA_QUEUE_RING - 1)] > now)
			break;
		q->head++;
	}
	ahead = q->tail - q->head;
	if (ahead >= q->depth || ahead >= INA_QUEUE_RING) {
		bpf_spin_unlock(&q->lock);
		return -1;
	}
	__u64 start = q->last_departure_ns > now ? q->last_departure_ns : now;
	q->last_departure_ns = start + (__u64)skb->len * 8ull * 1000000000ull / q->rate_bps;
	q->ring[q->tail & (INA_QUEUE_RING - 1)] = start;
	q->tail++;
	bpf_spin_unlock(&q->lock);
	return ahead;
}

SEC("tc")
int ina_egress(struct __sk_buff *skb)
{
	__u32 mark = skb->mark, zero_key = 0;
	if ((mark & MARK_INA) == 0)
		return TC_ACT_OK;
	__u32 ifindex = skb->ifindex;
	__u32 *port_of = bpf_map_lookup_elem(&ifindex_port, &ifindex);
	if (!port_of)
		return TC_ACT_OK;
	__u32 port = *port_of;
	if (port >= INA_PORTS)
		return TC_ACT_OK;
	__u64 now = bpf_ktime_get_ns();
	struct port_counts *counts = bpf_map_lookup_elem(&port_counts, &port);
	if (!counts)
		return TC_ACT_SHOT;
	if (mark & MARK_SECOND) {
		/* an impairment's duplicate: queued behind its original, not marked, counted or impaired */
		if (enqueue(skb, port, now) < 0) {
			__sync_fetch_and_add(&counts->queue_dropped, 1);
			return TC_ACT_SHOT;
		}
		skb->priority = HTB_CLASS_QUEUE;
		return TC_ACT_OK;
	}
	bpf_skb_pull_data(skb, skb->len);
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct frame *f = data;
	__u8 is_ina = (void *)(f + 1) <= data_end && f->ip.protocol == IPPROTO_UDP_ &&
		      f->udp.dest == bpf_htons(INA_UDP_PORT);
	__u8 strip = 0;
	if (is_ina && (mark & MARK_GACK)) {
		/* PA-ATP's GACK: the gradient's headers, without lanes, back to its sender */
		__u8 mac[6];
		__be32 addr = f->ip.daddr;
		__be16 udp_port = f->udp.dest;
		f->ina.flags = bpf_htons((f->ip.tos & 3) == 3 ? FLAG_GACK | FLAG_ECN_ECHO : FLAG_GACK);
		__builtin_memcpy(mac, f->eth.h_dest, 6);
		__builtin_memcpy(f->eth.h_dest, f->eth.h_source, 6);
		__builtin_memcpy(f->eth.h_source, mac, 6);
		f->ip.daddr = f->ip.saddr;
		f->ip.saddr = addr;
		f->udp.dest = f->udp.source;
		f->udp.source = udp_port;
		f->ip.tos &= 0xFC;
		f->ip.ttl = GACK_TTL;
		strip = 1;
	}
	if (mark & MARK_REPLICA) {
		struct rewrite_action *rw = bpf_map_lookup_elem(&ina_mcast_rewrite, &port);
		if (rw && (void *)(f + 1) <= data_end) {
			__builtin_memcpy(f->eth.h_dest, rw->mac, 6);
			f->ip.daddr = rw->ip;
			f->udp.check = 0;
		}
		if (is_ina && (bpf_ntohs(f->ina.flags) & FLAG_PULL))
			strip = 1;
	}
	if (strip) {
		f->ina.elems = 0;
		f->ip.tot_len = bpf_htons(GACK_IPV4_BYTES);
		f->udp.len = bpf_htons(GACK_UDP_BYTES);
		f->udp.check = 0;
		if (skb->len > HEADERS_BYTES && bpf_skb_change_tail(skb, HEADERS_BYTES, 0))
			return TC_ACT_SHOT;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		f = data;
	}
	skb->priority = HTB_CLASS_QUEUE;
	int ahead = enqueue(skb, port, now);
	if (ahead < 0) {
		__sync_fetch_and_add(&counts->queue_dropped, 1);
		return TC_ACT_SHOT;
	}
	if ((mark & MARK_CLONE) == 0) {
		__u32 zero = 0;
		__u64 *started = bpf_map_lookup_elem(&ingress_started, &zero);
		__u32 cell = 0;
		__u64 *packets = bpf_map_lookup_elem(&switch_wait, &cell);
		cell = 1;
		__u64 *sum = bpf_map_lookup_elem(&switch_wait, &cell);
		cell = 2;
		__u64 *longest = bpf_map_lookup_elem(&switch_wait, &cell);
		if (started && packets && sum && longest && now >= *started) {
			__u64 wait_us = (now - *started) / 1000;
			__sync_fetch_and_add(packets, 1);
			__sync_fetch_and_add(sum, wait_us);
			if (wait_us > *longest)
				*longest = wait_us;
		}
	}
	struct iphdr *ip = data + sizeof(struct ethhdr);
	if ((void *)(ip + 1) > data_end)
		return TC_ACT_OK;
	/* DCTCP-style marking: CE on ECN-capable frames that found >= ecn_threshold frames queued */
	if ((ip->tos & 3) == 1 || (ip->tos & 3) == 2) {
		__u32 *threshold = bpf_map_lookup_elem(&ecn_threshold, &zero_key);
		if (threshold && *threshold != 0 && (__u32)ahead >= *threshold) {
			ip->tos |= 3;
			__sync_fetch_and_add(&counts->ecn_marked, 1);
		}
	}
	f = data;
	if (is_ina && (void *)(f + 1) <= data_end &&
	    (bpf_ntohs(f->ina.flags) & (FLAG_DATA | FLAG_RESULT | FLAG_GACK)) == FLAG_DATA)
		__sync_fetch_and_add(&counts->ina_tx, 1);
	ipv4_checksum(ip);
	/* link impairments, last: the frame has its place in the queue and is on the port's link */
	struct port_impair *imp = bpf_map_lookup_elem(&port_impair, &port);
	if (imp) {
		if (imp->drop != 0 && (bpf_get_prandom_u32() & 0x7FFFFFFF) < imp->drop) {
			__sync_fetch_and_add(&counts->impair_dropped, 1);
			return TC_ACT_SHOT;
		}
		if (imp->duplicate != 0 && (bpf_get_prandom_u32() & 0x7FFFFFFF) < imp->duplicate) {
			/* the copy, as this frame leaves, joins the tail of its session's port queue */
			__u32 session = IMPAIR_SESSION_BASE + port;
			__u32 *to = bpf_map_lookup_elem(&mirror_sessions, &session);
			__sync_fetch_and_add(&counts->impair_duplicated, 1);
			if (to)
				clone_to_port(skb, *to, mark | MARK_SECOND);
			skb->mark = mark;
		}
		if (imp->reorder != 0 && (bpf_get_prandom_u32() & 0x7FFFFFFF) < imp->reorder) {
			/* ina.p4 recirculates it to rejoin the tail of the port's queue; here it goes to the
			   port's second htb class, served when the first has nothing to send: behind what is
			   queued (a port without shaping has no queue: it leaves at once, as on pyswitch) */
			__sync_fetch_and_add(&counts->impair_reordered, 1);
			skb->priority = HTB_CLASS_REORDERED;
		}
	}
	return TC_ACT_OK;
}
