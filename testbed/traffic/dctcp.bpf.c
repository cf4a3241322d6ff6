// SPDX-License-Identifier: GPL-2.0
/*
 * DCTCP (RFC 8257) as a BPF TCP congestion control, for kernels built without
 * tcp_dctcp: PA-ATP's background traffic runs DCTCP (its section III-B 2).
 * testbed/traffic/dctcp_bpf.py builds it against the running kernel's BTF and
 * registers it as "inatb_dctcp" for the runs whose background asks for dctcp.
 *
 * Sender (RFC 8257 section 3.3): alpha, the estimate of the fraction of bytes
 * that meet congestion, starts at 1 and is updated once per window of data:
 * alpha = (1 - g) alpha + g F, F the fraction of the window's delivered
 * segments the receiver echoed as CE-marked, g = 1/16. On an echo the kernel
 * enters CWR once per window and takes the new slow-start threshold from
 * ssthresh(): cwnd x (1 - alpha / 2). A loss (fast recovery or a timeout)
 * halves the window as Reno does (section 3.4). Growth is Reno's.
 *
 * Receiver (section 3.2): each ACK echoes (ECE) the CE state of the data it
 * acknowledges. The kernel reports every data segment's CE state
 * (CA_EVENT_ECN_IS_CE / CA_EVENT_ECN_NO_CE); when it changes, an ACK the
 * receiver was delaying goes out at once with the old state, and the next
 * ACK is sent at once with the new one.
 *
 * alpha is held in 1/1024ths. The per-socket state lives in the socket's
 * congestion-control area (icsk_ca_priv).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define ALPHA_ONE 1024U          /* alpha = 1 */
#define G_SHIFT 4                /* g = 1/2^4 */
#define ECN_DEMAND_CWR 4         /* tcp_sock.ecn_flags: ACKs carry ECE */
#define CONG_NEEDS_ECN 2         /* tcp_congestion_ops.flags: negotiate ECN, send ECT */

struct dctcp_state {
	__u32 window_end;            /* snd_nxt when the observation window began */
	__u32 delivered_at_start;    /* tp->delivered then */
	__u32 delivered_ce_at_start; /* tp->delivered_ce then */
	__u32 alpha;                 /* in 1/1024ths */
	__u32 loss_cwnd;             /* cwnd before the last reduction, for undo */
	__u32 receiving_ce;          /* receiver: the CE state of the last data segment */
	__u32 acked_up_to;           /* receiver: rcv_nxt at the last CE state report */
};

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

static __always_inline struct tcp_sock *tcp_of(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct dctcp_state *state_of(struct sock *sk)
{
	return (struct dctcp_state *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void begin_window(struct tcp_sock *tp, struct dctcp_state *s)
{
	s->window_end = tp->snd_nxt;
	s->delivered_at_start = tp->delivered;
	s->delivered_ce_at_start = tp->delivered_ce;
}

SEC("struct_ops")
void BPF_PROG(inatb_dctcp_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct dctcp_state *s = state_of(sk);

	s->alpha = ALPHA_ONE;
	s->loss_cwnd = 0;
	s->receiving_ce = 0;
	s->acked_up_to = tp->rcv_nxt;
	begin_window(tp, s);
}

SEC("struct_ops")
__u32 BPF_PROG(inatb_dctcp_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct dctcp_state *s = state_of(sk);
	__u32 cwnd = tp->snd_cwnd;
	__u32 reduced = cwnd - ((cwnd * s->alpha) >> 11);     /* cwnd x (1 - alpha / 2) */

	s->loss_cwnd = cwnd;
	return reduced > 2 ? reduced : 2;
}

SEC("struct_ops")
void BPF_PROG(inatb_dctcp_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct dctcp_state *s = state_of(sk);
	__u32 delivered, marked, alpha;

	if ((__s32)(tp->snd_una - s->window_end) < 0)
		return;                                         /* the window is not over yet */
	delivered = tp->delivered - s->delivered_at_start;
	marked = tp->delivered_ce - s->delivered_ce_at_start;
	alpha = s->alpha - (s->alpha >> G_SHIFT);
	if (delivered > 0) {
		if (marked > delivered)
			marked = delivered;
		alpha += (marked << (10 - G_SHIFT)) / delivered;
	}
	s->alpha = alpha < ALPHA_ONE ? alpha : ALPHA_ONE;
	begin_window(tp, s);
}

static __always_inline void halve_on_loss(struct sock *sk)
{
	struct tcp_sock *tp = tcp_of(sk);
	__u32 cwnd = tp->snd_cwnd;

	state_of(sk)->loss_cwnd = cwnd;
	tp->snd_ssthresh = cwnd / 2 > 2 ? cwnd / 2 : 2;
}

SEC("struct_ops")
void BPF_PROG(inatb_dctcp_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Recovery &&
	    ((struct inet_connection_sock *)sk)->icsk_ca_state != TCP_CA_Recovery)
		halve_on_loss(sk);
}

static __always_inline void echo(struct tcp_sock *tp, __u32 ce)
{
	if (ce)
		tp->ecn_flags |= ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~ECN_DEMAND_CWR;
}

SEC("struct_ops")
void BPF_PROG(inatb_dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct dctcp_state *s = state_of(sk);
	__u32 ce;

	if (event == CA_EVENT_LOSS) {
		halve_on_loss(sk);
		return;
	}
	if (event != CA_EVENT_ECN_IS_CE && event != CA_EVENT_ECN_NO_CE)
		return;
	ce = event == CA_EVENT_ECN_IS_CE;
	if (ce != s->receiving_ce) {
		if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
			/* the delayed ACK of the data before this segment, with their state */
			echo(tp, s->receiving_ce);
			bpf_tcp_send_ack(tp, s->acked_up_to);
		}
		icsk->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	s->acked_up_to = tp->rcv_nxt;
	s->receiving_ce = ce;
	echo(tp, ce);
}

SEC("struct_ops")
__u32 BPF_PROG(inatb_dctcp_undo_cwnd, struct sock *sk)
{
	__u32 cwnd = tcp_of(sk)->snd_cwnd;
	__u32 before = state_of(sk)->loss_cwnd;

	return cwnd > before ? cwnd : before;
}

SEC("struct_ops")
void BPF_PROG(inatb_dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops")
struct tcp_congestion_ops inatb_dctcp = {
	.init = (void *)inatb_dctcp_init,
	.ssthresh = (void *)inatb_dctcp_ssthresh,
	.in_ack_event = (void *)inatb_dctcp_in_ack_event,
	.set_state = (void *)inatb_dctcp_set_state,
	.cwnd_event = (void *)inatb_dctcp_cwnd_event,
	.undo_cwnd = (void *)inatb_dctcp_undo_cwnd,
	.cong_avoid = (void *)inatb_dctcp_cong_avoid,
	.flags = CONG_NEEDS_ECN,
	.name = "inatb_dctcp",
};
