"""Felix flow collection for Goldmane (design/felix-collector.md): NFLOG verdicts + conntrack
counters, aggregated per ``FlowLogsFlushInterval`` and streamed over ``FlowCollector.Connect``."""
