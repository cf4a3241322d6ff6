"""pyswitch: the Python reference model of ``p4/ina.p4``.

It is a model of that one program, not a general P4 interpreter. Its modules
mirror the program's controls one to one:

=================  ==========================================================
``fields.py``      the header fields it reads and rewrites, named once from
                   wire.py's layout (offsets, slices, codecs)
``tables.py``      match-action tables (exact, lpm) declared in program.py
``ingress.py``     parser + ``Ingress``: ina_filter, slot aggregation (release
                   on emit / on RESULT), route / ipv4_lpm, ina_result
                   release and multicast, ``agg_capacity`` meter; PA-ATP's
                   pa_job opt-in: progress registers, GACK verdicts, AECN
``ecmp.py``        route_ecmp's member: bmv2's CRC-16 of the five-tuple
``egress.py``      ``Egress``: PA-ATP's GACK rewrite, multicast-copy rewrite
                   (ina_mcast_rewrite),
                   ECN marking on enq_qdepth, port queues shaped like bmv2's
                   ``set_queue_rate``/``set_queue_depth``, and link loss /
                   duplication / reordering per port (seeded draws)
``core.py``        one switch's state and its control operations (the verbs
                   of SwitchRuntime), usable in-process by packet tests
``process.py``     the switch process: AF_PACKET ports, epoll loop, Unix
                   control socket
=================  ==========================================================
"""
