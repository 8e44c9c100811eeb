"""Felix rule rendering: calc-graph policy/endpoint state -> desired nftables chains, sets, maps.

See design/felix-rules.md. Pure functions only; the nftables table layer programs the result.
"""

from calico.felix.rules.config import RenderConfig
from calico.felix.rules.renderer import RuleRenderer

__all__ = ["RenderConfig", "RuleRenderer"]
