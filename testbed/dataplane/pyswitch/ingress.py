"""Parser and ``Ingress`` control of the INA program (p4/ina.p4), as Python.

Per packet, in the order the P4 program applies them:

1. Parse Ethernet / IPv4 (IHL 5) / UDP; a UDP packet to port 40000 carries the
   INA header and ``elems`` lanes. Malformed INA packets (short, ``elems`` >
   LANES) are dropped and counted (``malformed_dropped``), never a crash.
2. RESULT packets: ``ina_result`` may multicast them (``ina_multicast``).
3. DATA packets: ``ina_filter`` on (job, agg_node, submodel). ``ina_aggregate`` sums the
   lanes into the slot the packet names (range-checked against the job's
   slots here), with duplicate suppression by bitmap:

   - free slot, or slot of an older iteration of the same job: claim it
     (``stale_reclaimed`` counts the latter);
   - same tag, contributors disjoint: add lanes, OR bitmaps, add counts;
   - same tag, contributor already in: drop (``duplicate_dropped``); a RETX
     duplicate instead flushes the partial aggregate toward the next node
     and frees the slot (``partial_flushed``) so a lost aggregate or a
     contribution that bypassed elsewhere cannot wedge the slot;
   - slot held by another tag: COLLISION, the packet goes unchanged to
     ``bypass_dst`` (the PS), ATP's best-effort rule;
   - a RETX packet that finds no slot holding its tag goes to ``bypass_dst``
     too (``retx_bypassed``; ATP forwards resent packets to the PS): its
     siblings already left the switch, so a new partial would only wait for
     another timeout;
   - when ``count`` reaches ``fanin`` the packet becomes the aggregate:
     lanes = slot sums, source = switch address, destination, agg_node,
     fanin and slot rewritten for the next level, ``level`` + 1, UDP
     checksum 0; the slot is freed (release on emit).

   An exhausted ``agg_capacity`` meter bypasses like a collision with the
   CAPACITY flag (GRID §Motivation: a saturated switch passes gradients on).
4. ``route`` (exact src, dst) then ``ipv4_lpm`` (dst): set the destination MAC
   and egress port, TTL - 1. No entry: drop (``no_route_dropped``).

Arithmetic is 32-bit two's complement per lane, wrapping as bit<32> does.
"""

import struct
import time

import numpy as np

from testbed.dataplane import program
from testbed.dataplane.pyswitch.tables import Table
from testbed.dataplane.wire import (FLAG_CAPACITY, FLAG_COLLISION, FLAG_DATA, FLAG_RESULT, FLAG_RETX,
                                    INA_HEADER, INA_OFFSET, PAYLOAD_OFFSET)
from testbed.errors import DataplaneError

S = program.STAT_INDICES
ST_INA_RX, ST_AGG, ST_EMIT, ST_DUP = S["ina_rx"], S["aggregated"], S["emitted"], S["duplicate_dropped"]
ST_COLL, ST_CAP, ST_MAL, ST_RANGE = (S["collision_bypassed"], S["capacity_bypassed"], S["malformed_dropped"],
                                     S["slot_range_dropped"])
ST_FWD, ST_NOROUTE, ST_FLUSH, ST_STALE = S["forwarded"], S["no_route_dropped"], S["partial_flushed"], S["stale_reclaimed"]
ST_MCAST, ST_RETX_BYPASS = S["multicast"], S["retx_bypassed"]

_U16 = struct.Struct("!H")
_SLOT_BITMAP = struct.Struct("!IQ")     # slot, bitmap at INA_OFFSET+22


class TokenBucket:
    """A v1model-style single-rate meter: ``rate_per_s`` tokens/s, ``burst`` deep."""

    def __init__(self, rate_per_s: float, burst: int):
        self.rate_per_s = float(rate_per_s)
        self.burst = float(max(1, burst))
        self.tokens = self.burst
        self.last = time.monotonic()

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate_per_s)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Ingress:
    """State and logic of the Ingress control of one switch."""

    def __init__(self, lanes: int = 64, slots: int = program.DEFAULT_SLOTS):
        self.lanes = lanes
        self.slots = slots
        self.tables = {name: Table(decl) for name, decl in program.TABLES.items()}
        # Registers, named as in ina.p4; agg_value is [slot][lane] here, flat in P4.
        self.agg_value = np.zeros((slots, lanes), dtype=np.int32)
        self.agg_bitmap = [0] * slots
        self.agg_count = [0] * slots
        self.agg_job = [0] * slots
        self.agg_iteration = [0] * slots
        self.agg_seq = [0] * slots
        self.stats = [0] * len(program.STAT_INDICES)
        self.stats_bytes = [0] * len(program.STAT_INDICES)
        self.agg_capacity = None           # TokenBucket when the scenario sets a capacity
        self.mc_groups = {}                # group id -> tuple of ports

    # -- control-plane helpers ------------------------------------------------
    def prepare_params(self, action: str, params: tuple) -> tuple:
        """Turn declared (name, value) pairs into the tuple the fast path uses."""
        values = {}
        for decl, (_, value) in zip(program.ACTIONS[action].params, params):
            if decl.kind == "ip":
                values[decl.name] = bytes(int(x) for x in str(value).split("."))
            elif decl.kind == "mac":
                values[decl.name] = bytes(int(x, 16) for x in str(value).split(":"))
            else:
                values[decl.name] = int(value)
        if action == "ina_aggregate":
            base, count = values["slot_base"], values["slot_count"]
            if count < 1 or base + count > self.slots:
                raise DataplaneError(f"ina_aggregate: slot range [{base}, {base + count}) outside the switch's "
                                     f"{self.slots} slots")
            if values["release_mode"] != program.RELEASE_ON_EMIT:
                raise DataplaneError(f"ina_aggregate: release_mode {values['release_mode']} is not supported "
                                     f"yet (0 = release on emit)")
        return tuple(values[p.name] for p in program.ACTIONS[action].params)

    def release(self, slot: int):
        self.agg_count[slot] = 0
        self.agg_bitmap[slot] = 0

    # -- fast path ---------------------------------------------------------------
    def process(self, buf: bytearray, now: float):
        """Run parser + Ingress on ``buf`` (modified in place).

        Returns ``None`` (dropped/absorbed), an egress port (int), or a tuple of
        ports (multicast).
        """
        n = len(buf)
        if n < 34 or buf[12] != 8 or buf[13] != 0 or buf[14] != 0x45:
            return None
        if buf[23] == 17 and n >= 42 and buf[36] == 0x9C and buf[37] == 0x40:
            verdict = self._ina(buf, n, now)
            if verdict is not True:
                return verdict
        return self._forward(buf)

    def _ina(self, buf, n, now):
        """INA processing. True = continue to forwarding; otherwise the final verdict."""
        stats = self.stats
        if n < PAYLOAD_OFFSET:
            stats[ST_MAL] += 1
            return None
        (job, flags, elems, level, agg_node, fanin, count, submodel, iteration, seq, slot, bitmap,
         _progress) = INA_HEADER.unpack_from(buf, INA_OFFSET)
        if elems > self.lanes or n < PAYLOAD_OFFSET + 4 * elems:
            stats[ST_MAL] += 1
            return None
        stats[ST_INA_RX] += 1
        if flags & FLAG_RESULT:
            return self._result(buf, job, iteration, seq)
        # ina_filter key: job, agg_node, submodel (header offsets 0, 6, 12)
        action, p = self.tables["ina_filter"].lookup(bytes(buf[INA_OFFSET:INA_OFFSET + 2]) +
                                                     bytes(buf[INA_OFFSET + 6:INA_OFFSET + 8]) +
                                                     bytes(buf[INA_OFFSET + 12:INA_OFFSET + 14]))
        if action != "ina_aggregate":
            return True
        (switch_addr, slot_base, slot_count, release_mode, next_agg_node, next_fanin, next_dst,
         next_slot_base, next_slot_count, bypass_dst) = p
        if not slot_base <= slot < slot_base + slot_count:
            stats[ST_RANGE] += 1
            return None
        if self.agg_capacity is not None and not self.agg_capacity.take(now):
            stats[ST_CAP] += 1
            return self._bypass(buf, flags | FLAG_CAPACITY, bypass_dst)
        held = self.agg_count[slot]
        if held:
            if self.agg_job[slot] != job or (self.agg_seq[slot] != seq and self.agg_iteration[slot] >= iteration) \
                    or self.agg_iteration[slot] > iteration:
                stats[ST_COLL] += 1
                return self._bypass(buf, flags | FLAG_COLLISION, bypass_dst)
            if self.agg_iteration[slot] < iteration:
                stats[ST_STALE] += 1
                held = 0
        if not held and flags & FLAG_RETX:
            # A retransmission finds no slot holding its tag: the others'
            # contributions already left (aggregate or flush), so it goes on to
            # the PS rather than starting a partial that would wait a timeout.
            stats[ST_RETX_BYPASS] += 1
            return self._bypass(buf, flags, bypass_dst)
        lanes_in = np.frombuffer(buf, dtype=">i4", count=elems, offset=PAYLOAD_OFFSET)
        if not held:
            row = self.agg_value[slot]
            row[:elems] = lanes_in
            if elems < self.lanes:
                row[elems:] = 0
            self.agg_bitmap[slot] = bitmap
            self.agg_count[slot] = count
            self.agg_job[slot] = job
            self.agg_iteration[slot] = iteration
            self.agg_seq[slot] = seq
        elif self.agg_bitmap[slot] & bitmap:
            stats[ST_DUP] += 1
            if not flags & FLAG_RETX:
                return None
            # A retransmission of a contribution the slot already holds: the
            # others' contributions may never come here (they bypassed, or the
            # aggregate was lost): flush what the slot has and free it.
            stats[ST_FLUSH] += 1
            return self._emit(buf, slot, level, elems, flags, switch_addr, next_agg_node, next_fanin, next_dst,
                              next_slot_base, next_slot_count, seq)
        else:
            np.add(self.agg_value[slot, :elems], lanes_in, out=self.agg_value[slot, :elems], casting="unsafe")
            self.agg_bitmap[slot] |= bitmap
            self.agg_count[slot] += count
        stats[ST_AGG] += 1
        if self.agg_count[slot] >= fanin:
            return self._emit(buf, slot, level, elems, flags, switch_addr, next_agg_node, next_fanin, next_dst,
                              next_slot_base, next_slot_count, seq)
        return None

    def _emit(self, buf, slot, level, elems, flags, switch_addr, next_agg_node, next_fanin, next_dst,
              next_slot_base, next_slot_count, seq):
        """Rewrite ``buf`` into the aggregate of ``slot`` toward the next level."""
        self.stats[ST_EMIT] += 1
        next_slot = next_slot_base + (seq % next_slot_count if next_slot_count else 0)
        buf[INA_OFFSET + 2:INA_OFFSET + 4] = _U16.pack((flags & ~FLAG_RETX) | FLAG_DATA)
        buf[INA_OFFSET + 5] = min(255, level + 1)
        count = self.agg_count[slot]
        _U16.pack_into(buf, INA_OFFSET + 6, next_agg_node)
        _U16.pack_into(buf, INA_OFFSET + 8, next_fanin)
        _U16.pack_into(buf, INA_OFFSET + 10, count)
        _SLOT_BITMAP.pack_into(buf, INA_OFFSET + 22, next_slot, self.agg_bitmap[slot])
        buf[PAYLOAD_OFFSET:PAYLOAD_OFFSET + 4 * elems] = self.agg_value[slot, :elems].astype(">i4").tobytes()
        buf[26:30] = switch_addr
        buf[30:34] = next_dst
        buf[40] = buf[41] = 0  # UDP checksum: the payload changed
        self.release(slot)
        return True

    def _bypass(self, buf, flags, bypass_dst):
        _U16.pack_into(buf, INA_OFFSET + 2, flags)
        buf[30:34] = bypass_dst
        buf[40] = buf[41] = 0
        return True

    def _result(self, buf, job, iteration, seq):
        """RESULT packets: multicast to the job's workers when ``ina_result`` says so."""
        action, p = self.tables["ina_result"].lookup(bytes(buf[INA_OFFSET:INA_OFFSET + 2]) + bytes(buf[30:34]))
        if action == "ina_multicast":
            ports = self.mc_groups.get(p[0])
            if ports:
                self.stats[ST_MCAST] += 1
                return ports
        return True

    def _forward(self, buf):
        stats = self.stats
        key = bytes(buf[26:34])
        action, p = self.tables["route"].lookup(key)
        if action != "route_forward":
            action, p = self.tables["ipv4_lpm"].lookup(key[4:])
            if action != "ipv4_forward":
                stats[ST_NOROUTE] += 1
                return None
        ttl = buf[22]
        if ttl <= 1:
            stats[ST_NOROUTE] += 1
            return None
        buf[22] = ttl - 1
        buf[0:6] = p[0]
        stats[ST_FWD] += 1
        return p[1]
