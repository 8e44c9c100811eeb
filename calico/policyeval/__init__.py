"""Policy evaluation shared by Felix and calicoctl: the pure rule semantics (ordering keys,
ports, protocols, selector folding, label inheritance) and an offline evaluator that walks an
endpoint's tiers exactly as Felix's rendered chains do (design/explain.md).
"""
