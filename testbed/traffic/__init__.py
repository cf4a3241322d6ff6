"""Background datacenter traffic: flow-size distributions, flow plans and the flow generator agent."""
