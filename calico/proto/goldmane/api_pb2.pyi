from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FilterType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FilterTypeUnspecified: _ClassVar[FilterType]
    FilterTypeDestName: _ClassVar[FilterType]
    FilterTypeSourceName: _ClassVar[FilterType]
    FilterTypeDestNamespace: _ClassVar[FilterType]
    FilterTypeSourceNamespace: _ClassVar[FilterType]
    FilterTypePolicyTier: _ClassVar[FilterType]
    FilterTypePolicyName: _ClassVar[FilterType]
    FilterTypePolicyKind: _ClassVar[FilterType]
    FilterTypePolicyNamespace: _ClassVar[FilterType]

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ActionUnspecified: _ClassVar[Action]
    Allow: _ClassVar[Action]
    Deny: _ClassVar[Action]
    Pass: _ClassVar[Action]

class MatchType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Exact: _ClassVar[MatchType]
    Fuzzy: _ClassVar[MatchType]

class PolicyKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KindUnspecified: _ClassVar[PolicyKind]
    CalicoNetworkPolicy: _ClassVar[PolicyKind]
    GlobalNetworkPolicy: _ClassVar[PolicyKind]
    StagedNetworkPolicy: _ClassVar[PolicyKind]
    StagedGlobalNetworkPolicy: _ClassVar[PolicyKind]
    StagedKubernetesNetworkPolicy: _ClassVar[PolicyKind]
    NetworkPolicy: _ClassVar[PolicyKind]
    Profile: _ClassVar[PolicyKind]
    EndOfTier: _ClassVar[PolicyKind]
    ClusterNetworkPolicy: _ClassVar[PolicyKind]

class SortBy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Time: _ClassVar[SortBy]
    DestName: _ClassVar[SortBy]
    DestNamespace: _ClassVar[SortBy]
    DestType: _ClassVar[SortBy]
    SourceName: _ClassVar[SortBy]
    SourceNamespace: _ClassVar[SortBy]
    SourceType: _ClassVar[SortBy]

class EndpointType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EndpointTypeUnspecified: _ClassVar[EndpointType]
    WorkloadEndpoint: _ClassVar[EndpointType]
    HostEndpoint: _ClassVar[EndpointType]
    NetworkSet: _ClassVar[EndpointType]
    Network: _ClassVar[EndpointType]

class Reporter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ReporterUnspecified: _ClassVar[Reporter]
    Src: _ClassVar[Reporter]
    Dst: _ClassVar[Reporter]

class StatisticType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PacketCount: _ClassVar[StatisticType]
    ByteCount: _ClassVar[StatisticType]
    LiveConnectionCount: _ClassVar[StatisticType]

class StatisticsGroupBy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Policy: _ClassVar[StatisticsGroupBy]
    PolicyRule: _ClassVar[StatisticsGroupBy]

class RuleDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Any: _ClassVar[RuleDirection]
    Ingress: _ClassVar[RuleDirection]
    Egress: _ClassVar[RuleDirection]
FilterTypeUnspecified: FilterType
FilterTypeDestName: FilterType
FilterTypeSourceName: FilterType
FilterTypeDestNamespace: FilterType
FilterTypeSourceNamespace: FilterType
FilterTypePolicyTier: FilterType
FilterTypePolicyName: FilterType
FilterTypePolicyKind: FilterType
FilterTypePolicyNamespace: FilterType
ActionUnspecified: Action
Allow: Action
Deny: Action
Pass: Action
Exact: MatchType
Fuzzy: MatchType
KindUnspecified: PolicyKind
CalicoNetworkPolicy: PolicyKind
GlobalNetworkPolicy: PolicyKind
StagedNetworkPolicy: PolicyKind
StagedGlobalNetworkPolicy: PolicyKind
StagedKubernetesNetworkPolicy: PolicyKind
NetworkPolicy: PolicyKind
Profile: PolicyKind
EndOfTier: PolicyKind
ClusterNetworkPolicy: PolicyKind
Time: SortBy
DestName: SortBy
DestNamespace: SortBy
DestType: SortBy
SourceName: SortBy
SourceNamespace: SortBy
SourceType: SortBy
EndpointTypeUnspecified: EndpointType
WorkloadEndpoint: EndpointType
HostEndpoint: EndpointType
NetworkSet: EndpointType
Network: EndpointType
ReporterUnspecified: Reporter
Src: Reporter
Dst: Reporter
PacketCount: StatisticType
ByteCount: StatisticType
LiveConnectionCount: StatisticType
Policy: StatisticsGroupBy
PolicyRule: StatisticsGroupBy
Any: RuleDirection
Ingress: RuleDirection
Egress: RuleDirection

class FlowListRequest(_message.Message):
    __slots__ = ("start_time_gte", "start_time_lt", "page", "page_size", "sort_by", "filter", "aggregation_interval")
    START_TIME_GTE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_LT_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    SORT_BY_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    start_time_gte: int
    start_time_lt: int
    page: int
    page_size: int
    sort_by: _containers.RepeatedCompositeFieldContainer[SortOption]
    filter: Filter
    aggregation_interval: int
    def __init__(self, start_time_gte: _Optional[int] = ..., start_time_lt: _Optional[int] = ..., page: _Optional[int] = ..., page_size: _Optional[int] = ..., sort_by: _Optional[_Iterable[_Union[SortOption, _Mapping]]] = ..., filter: _Optional[_Union[Filter, _Mapping]] = ..., aggregation_interval: _Optional[int] = ...) -> None: ...

class FlowListResult(_message.Message):
    __slots__ = ("meta", "flows")
    META_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    meta: ListMetadata
    flows: _containers.RepeatedCompositeFieldContainer[FlowResult]
    def __init__(self, meta: _Optional[_Union[ListMetadata, _Mapping]] = ..., flows: _Optional[_Iterable[_Union[FlowResult, _Mapping]]] = ...) -> None: ...

class FlowStreamRequest(_message.Message):
    __slots__ = ("start_time_gte", "filter", "aggregation_interval")
    START_TIME_GTE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    start_time_gte: int
    filter: Filter
    aggregation_interval: int
    def __init__(self, start_time_gte: _Optional[int] = ..., filter: _Optional[_Union[Filter, _Mapping]] = ..., aggregation_interval: _Optional[int] = ...) -> None: ...

class FilterHintsRequest(_message.Message):
    __slots__ = ("type", "filter", "start_time_gte", "start_time_lt", "page", "page_size")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    START_TIME_GTE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_LT_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    type: FilterType
    filter: Filter
    start_time_gte: int
    start_time_lt: int
    page: int
    page_size: int
    def __init__(self, type: _Optional[_Union[FilterType, str]] = ..., filter: _Optional[_Union[Filter, _Mapping]] = ..., start_time_gte: _Optional[int] = ..., start_time_lt: _Optional[int] = ..., page: _Optional[int] = ..., page_size: _Optional[int] = ...) -> None: ...

class FilterHintsResult(_message.Message):
    __slots__ = ("meta", "hints")
    META_FIELD_NUMBER: _ClassVar[int]
    HINTS_FIELD_NUMBER: _ClassVar[int]
    meta: ListMetadata
    hints: _containers.RepeatedCompositeFieldContainer[FilterHint]
    def __init__(self, meta: _Optional[_Union[ListMetadata, _Mapping]] = ..., hints: _Optional[_Iterable[_Union[FilterHint, _Mapping]]] = ...) -> None: ...

class ListMetadata(_message.Message):
    __slots__ = ("totalPages", "totalResults")
    TOTALPAGES_FIELD_NUMBER: _ClassVar[int]
    TOTALRESULTS_FIELD_NUMBER: _ClassVar[int]
    totalPages: int
    totalResults: int
    def __init__(self, totalPages: _Optional[int] = ..., totalResults: _Optional[int] = ...) -> None: ...

class FilterHint(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: str
    def __init__(self, value: _Optional[str] = ...) -> None: ...

class FlowResult(_message.Message):
    __slots__ = ("id", "flow")
    ID_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    id: int
    flow: Flow
    def __init__(self, id: _Optional[int] = ..., flow: _Optional[_Union[Flow, _Mapping]] = ...) -> None: ...

class Filter(_message.Message):
    __slots__ = ("source_names", "source_namespaces", "dest_names", "dest_namespaces", "protocols", "dest_ports", "actions", "policies", "reporter", "pending_actions")
    SOURCE_NAMES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    DEST_NAMES_FIELD_NUMBER: _ClassVar[int]
    DEST_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    DEST_PORTS_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    PENDING_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    source_names: _containers.RepeatedCompositeFieldContainer[StringMatch]
    source_namespaces: _containers.RepeatedCompositeFieldContainer[StringMatch]
    dest_names: _containers.RepeatedCompositeFieldContainer[StringMatch]
    dest_namespaces: _containers.RepeatedCompositeFieldContainer[StringMatch]
    protocols: _containers.RepeatedCompositeFieldContainer[StringMatch]
    dest_ports: _containers.RepeatedCompositeFieldContainer[PortMatch]
    actions: _containers.RepeatedScalarFieldContainer[Action]
    policies: _containers.RepeatedCompositeFieldContainer[PolicyMatch]
    reporter: Reporter
    pending_actions: _containers.RepeatedScalarFieldContainer[Action]
    def __init__(self, source_names: _Optional[_Iterable[_Union[StringMatch, _Mapping]]] = ..., source_namespaces: _Optional[_Iterable[_Union[StringMatch, _Mapping]]] = ..., dest_names: _Optional[_Iterable[_Union[StringMatch, _Mapping]]] = ..., dest_namespaces: _Optional[_Iterable[_Union[StringMatch, _Mapping]]] = ..., protocols: _Optional[_Iterable[_Union[StringMatch, _Mapping]]] = ..., dest_ports: _Optional[_Iterable[_Union[PortMatch, _Mapping]]] = ..., actions: _Optional[_Iterable[_Union[Action, str]]] = ..., policies: _Optional[_Iterable[_Union[PolicyMatch, _Mapping]]] = ..., reporter: _Optional[_Union[Reporter, str]] = ..., pending_actions: _Optional[_Iterable[_Union[Action, str]]] = ...) -> None: ...

class StringMatch(_message.Message):
    __slots__ = ("value", "type")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    value: str
    type: MatchType
    def __init__(self, value: _Optional[str] = ..., type: _Optional[_Union[MatchType, str]] = ...) -> None: ...

class PortMatch(_message.Message):
    __slots__ = ("port",)
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: int
    def __init__(self, port: _Optional[int] = ...) -> None: ...

class SortOption(_message.Message):
    __slots__ = ("sort_by",)
    SORT_BY_FIELD_NUMBER: _ClassVar[int]
    sort_by: SortBy
    def __init__(self, sort_by: _Optional[_Union[SortBy, str]] = ...) -> None: ...

class PolicyMatch(_message.Message):
    __slots__ = ("kind", "tier", "namespace", "name", "action")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    kind: PolicyKind
    tier: StringMatch
    namespace: StringMatch
    name: StringMatch
    action: Action
    def __init__(self, kind: _Optional[_Union[PolicyKind, str]] = ..., tier: _Optional[_Union[StringMatch, _Mapping]] = ..., namespace: _Optional[_Union[StringMatch, _Mapping]] = ..., name: _Optional[_Union[StringMatch, _Mapping]] = ..., action: _Optional[_Union[Action, str]] = ...) -> None: ...

class FlowReceipt(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FlowUpdate(_message.Message):
    __slots__ = ("flow",)
    FLOW_FIELD_NUMBER: _ClassVar[int]
    flow: Flow
    def __init__(self, flow: _Optional[_Union[Flow, _Mapping]] = ...) -> None: ...

class FlowKey(_message.Message):
    __slots__ = ("source_name", "source_namespace", "source_type", "dest_name", "dest_namespace", "dest_type", "dest_port", "dest_service_name", "dest_service_namespace", "dest_service_port_name", "dest_service_port", "proto", "reporter", "action", "policies", "source_ip")
    SOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEST_NAME_FIELD_NUMBER: _ClassVar[int]
    DEST_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DEST_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEST_PORT_FIELD_NUMBER: _ClassVar[int]
    DEST_SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    DEST_SERVICE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DEST_SERVICE_PORT_NAME_FIELD_NUMBER: _ClassVar[int]
    DEST_SERVICE_PORT_FIELD_NUMBER: _ClassVar[int]
    PROTO_FIELD_NUMBER: _ClassVar[int]
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IP_FIELD_NUMBER: _ClassVar[int]
    source_name: str
    source_namespace: str
    source_type: EndpointType
    dest_name: str
    dest_namespace: str
    dest_type: EndpointType
    dest_port: int
    dest_service_name: str
    dest_service_namespace: str
    dest_service_port_name: str
    dest_service_port: int
    proto: str
    reporter: Reporter
    action: Action
    policies: PolicyTrace
    source_ip: str
    def __init__(self, source_name: _Optional[str] = ..., source_namespace: _Optional[str] = ..., source_type: _Optional[_Union[EndpointType, str]] = ..., dest_name: _Optional[str] = ..., dest_namespace: _Optional[str] = ..., dest_type: _Optional[_Union[EndpointType, str]] = ..., dest_port: _Optional[int] = ..., dest_service_name: _Optional[str] = ..., dest_service_namespace: _Optional[str] = ..., dest_service_port_name: _Optional[str] = ..., dest_service_port: _Optional[int] = ..., proto: _Optional[str] = ..., reporter: _Optional[_Union[Reporter, str]] = ..., action: _Optional[_Union[Action, str]] = ..., policies: _Optional[_Union[PolicyTrace, _Mapping]] = ..., source_ip: _Optional[str] = ...) -> None: ...

class Flow(_message.Message):
    __slots__ = ("Key", "start_time", "end_time", "source_labels", "dest_labels", "packets_in", "packets_out", "bytes_in", "bytes_out", "num_connections_started", "num_connections_completed", "num_connections_live", "source_ips", "source_ports")
    KEY_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LABELS_FIELD_NUMBER: _ClassVar[int]
    DEST_LABELS_FIELD_NUMBER: _ClassVar[int]
    PACKETS_IN_FIELD_NUMBER: _ClassVar[int]
    PACKETS_OUT_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    NUM_CONNECTIONS_STARTED_FIELD_NUMBER: _ClassVar[int]
    NUM_CONNECTIONS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    NUM_CONNECTIONS_LIVE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IPS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PORTS_FIELD_NUMBER: _ClassVar[int]
    Key: FlowKey
    start_time: int
    end_time: int
    source_labels: _containers.RepeatedScalarFieldContainer[str]
    dest_labels: _containers.RepeatedScalarFieldContainer[str]
    packets_in: int
    packets_out: int
    bytes_in: int
    bytes_out: int
    num_connections_started: int
    num_connections_completed: int
    num_connections_live: int
    source_ips: _containers.RepeatedScalarFieldContainer[str]
    source_ports: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, Key: _Optional[_Union[FlowKey, _Mapping]] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., source_labels: _Optional[_Iterable[str]] = ..., dest_labels: _Optional[_Iterable[str]] = ..., packets_in: _Optional[int] = ..., packets_out: _Optional[int] = ..., bytes_in: _Optional[int] = ..., bytes_out: _Optional[int] = ..., num_connections_started: _Optional[int] = ..., num_connections_completed: _Optional[int] = ..., num_connections_live: _Optional[int] = ..., source_ips: _Optional[_Iterable[str]] = ..., source_ports: _Optional[_Iterable[int]] = ...) -> None: ...

class PolicyTrace(_message.Message):
    __slots__ = ("enforced_policies", "pending_policies")
    ENFORCED_POLICIES_FIELD_NUMBER: _ClassVar[int]
    PENDING_POLICIES_FIELD_NUMBER: _ClassVar[int]
    enforced_policies: _containers.RepeatedCompositeFieldContainer[PolicyHit]
    pending_policies: _containers.RepeatedCompositeFieldContainer[PolicyHit]
    def __init__(self, enforced_policies: _Optional[_Iterable[_Union[PolicyHit, _Mapping]]] = ..., pending_policies: _Optional[_Iterable[_Union[PolicyHit, _Mapping]]] = ...) -> None: ...

class PolicyHit(_message.Message):
    __slots__ = ("kind", "namespace", "name", "tier", "action", "policy_index", "rule_index", "trigger")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    POLICY_INDEX_FIELD_NUMBER: _ClassVar[int]
    RULE_INDEX_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    kind: PolicyKind
    namespace: str
    name: str
    tier: str
    action: Action
    policy_index: int
    rule_index: int
    trigger: PolicyHit
    def __init__(self, kind: _Optional[_Union[PolicyKind, str]] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., tier: _Optional[str] = ..., action: _Optional[_Union[Action, str]] = ..., policy_index: _Optional[int] = ..., rule_index: _Optional[int] = ..., trigger: _Optional[_Union[PolicyHit, _Mapping]] = ...) -> None: ...

class StatisticsRequest(_message.Message):
    __slots__ = ("start_time_gte", "start_time_lt", "type", "group_by", "policy_match", "time_series")
    START_TIME_GTE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_LT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    POLICY_MATCH_FIELD_NUMBER: _ClassVar[int]
    TIME_SERIES_FIELD_NUMBER: _ClassVar[int]
    start_time_gte: int
    start_time_lt: int
    type: StatisticType
    group_by: StatisticsGroupBy
    policy_match: PolicyMatch
    time_series: bool
    def __init__(self, start_time_gte: _Optional[int] = ..., start_time_lt: _Optional[int] = ..., type: _Optional[_Union[StatisticType, str]] = ..., group_by: _Optional[_Union[StatisticsGroupBy, str]] = ..., policy_match: _Optional[_Union[PolicyMatch, _Mapping]] = ..., time_series: _Optional[bool] = ...) -> None: ...

class StatisticsResult(_message.Message):
    __slots__ = ("policy", "direction", "group_by", "type", "allowed_in", "allowed_out", "denied_in", "denied_out", "passed_in", "passed_out", "x")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_IN_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_OUT_FIELD_NUMBER: _ClassVar[int]
    DENIED_IN_FIELD_NUMBER: _ClassVar[int]
    DENIED_OUT_FIELD_NUMBER: _ClassVar[int]
    PASSED_IN_FIELD_NUMBER: _ClassVar[int]
    PASSED_OUT_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    policy: PolicyHit
    direction: RuleDirection
    group_by: StatisticsGroupBy
    type: StatisticType
    allowed_in: _containers.RepeatedScalarFieldContainer[int]
    allowed_out: _containers.RepeatedScalarFieldContainer[int]
    denied_in: _containers.RepeatedScalarFieldContainer[int]
    denied_out: _containers.RepeatedScalarFieldContainer[int]
    passed_in: _containers.RepeatedScalarFieldContainer[int]
    passed_out: _containers.RepeatedScalarFieldContainer[int]
    x: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, policy: _Optional[_Union[PolicyHit, _Mapping]] = ..., direction: _Optional[_Union[RuleDirection, str]] = ..., group_by: _Optional[_Union[StatisticsGroupBy, str]] = ..., type: _Optional[_Union[StatisticType, str]] = ..., allowed_in: _Optional[_Iterable[int]] = ..., allowed_out: _Optional[_Iterable[int]] = ..., denied_in: _Optional[_Iterable[int]] = ..., denied_out: _Optional[_Iterable[int]] = ..., passed_in: _Optional[_Iterable[int]] = ..., passed_out: _Optional[_Iterable[int]] = ..., x: _Optional[_Iterable[int]] = ...) -> None: ...
