"""The config APIs: DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

On one node the broker is also the controller, so each handler does what Kafka splits between the
broker that receives the request and the controller:

* ``ConfigAdminManager.preprocess``: the broker's own checks of AlterConfigs and
  IncrementalAlterConfigs (duplicate resources and keys, null values, broker resources).
* ``ControllerApis`` (handleIncrementalAlterConfigs, handleLegacyAlterConfigs) and
  ``ConfigurationControlManager`` (incrementalAlterConfigResource, legacyAlterConfigResource,
  validateAlterConfig): config changes, validated as a whole (``topic_validation.py``), then the
  existence of the topic.
* ``ConfigHelper.describeConfigs``: DescribeConfigs (the entries: ``storage/config_entries.py``).
* ``DynamicBrokerConfig``: BROKER resources, this node's (its id) and the cluster-wide defaults
  (the empty name): the settings Kafka can change at run time are changed, kept in the data dir
  and applied (storage/dynamic_config.py: topic defaults at once to every topic without an
  override; a TLS listener's stores for its next connections; ``_alter_broker`` says what waits for
  the next start), names Kafka cannot change at run time refused with its messages, custom names
  kept.
* GROUP resources (Kafka 4.0's group configs): validated as Kafka's GroupConfig (the broker's
  bounds, a session longer than the heartbeat interval), kept and described as Kafka does; the
  consumer groups (KIP-848) read consumer.session.timeout.ms and consumer.heartbeat.interval.ms
  at every heartbeat, classic groups none of them.

Authorization (``ConfigHelper``, ``ControllerApis.authorizeAlterResource``): describing needs
DESCRIBE_CONFIGS and altering ALTER_CONFIGS, on the topic (else TOPIC_AUTHORIZATION_FAILED), on the
group for a group resource (else GROUP_AUTHORIZATION_FAILED) or on the cluster for a broker
resource (else CLUSTER_AUTHORIZATION_FAILED); a refused resource is answered without any of its
configs.

Where compactlog differs, on purpose: BROKER_LOGGER (log4j levels) and CLIENT_METRICS resources
are not supported (INVALID_REQUEST for that resource); ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map`` cannot change while the broker runs; compactlog's own settings
(``compactlog.*``, ``metrics.listener``, the authorizer's ``super.users``...) are not dynamic; and a
change the next start would refuse (a Java class, a SASL mechanism compactlog does not offer, a
key store that does not load) is refused now.
"""

from __future__ import annotations

import re

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, ConfigError
from ...storage.config import TOPIC_CONFIGS, ConfigDef, ConfigValueError, kafka_string
from ...storage.dynamic_config import (GROUP_CONFIGS, NOT_AT_RUN_TIME, DynamicConfigs, broker_kind,
                                       dynamic_name_refusal, effect, listener_base_name, validate_group_configs)
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, nested, response_types
from ..state import BrokerState
from ..security.redaction import is_secret_setting
from ..wire_errors import admin_error, scrub
from ...storage.config_entries import (SOURCE_DEFAULT, ConfigEntry, broker_config_entries, group_config_entries,
                                       topic_config_entries)
from .handler import THREAD, ApiHandler, Refused
from .topic_validation import topic_name_error, validate_topic_configs

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32
_RESOURCE_NAMES = {1: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
                   32: "GROUP"}

# the resource each config resource type is authorized on, and the error when it is not
_AUTHORIZED_ON = {RESOURCE_TOPIC: (auth_helper.TOPIC, ErrorCode.topic_authorization_failed),
                  32: (auth_helper.GROUP, ErrorCode.group_authorization_failed)}
_ON_CLUSTER = (auth_helper.CLUSTER, ErrorCode.cluster_authorization_failed)     # BROKER, BROKER_LOGGER, CLIENT_METRICS


def _refused_by_acls(state: BrokerState, request, resource, operation) -> Refused | None:
    """The refusal of a config resource whose ``operation`` the principal may not do, or None."""
    if not auth_helper.enabled(state) or resource.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER,
                                                                        RESOURCE_BROKER_LOGGER, 16, 32):
        return None
    kind, code = _AUTHORIZED_ON.get(resource.resource_type, _ON_CLUSTER)
    name = auth_helper.CLUSTER_NAME if kind == auth_helper.CLUSTER else resource.resource_name
    if auth_helper.authorize(state, request, operation, kind, name):
        return None
    return Refused(code, auth_helper.DENIED_MESSAGE[code])


# AlterConfigOp.OpType
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

# a broker id as Java's Integer.parseInt reads a resource name (no surrounding blanks)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def _resource_label(resource_type: int) -> str:
    return f"{resource_type} ({_RESOURCE_NAMES[resource_type]})" if resource_type in _RESOURCE_NAMES \
        else str(resource_type)


def _unsupported_resource(resource_type: int) -> Refused:
    return Refused(ErrorCode.invalid_request,
                   f"Unsupported resource type {_resource_label(resource_type)}: compactlog serves "
                   f"TOPIC (2), BROKER (4) and GROUP (32) configs only")


def _parse_broker_id(name: str, what: str = "Broker id") -> int:
    if not _JAVA_INTEGER.fullmatch(name) or not -2 ** 31 <= int(name) < 2 ** 31:
        raise Refused(ErrorCode.invalid_request, f"{what} must be an integer, but it is: {name}")
    return int(name)


def handle_describe_configs(state: BrokerState, request):
    """DescribeConfigs (32): ConfigHelper.handleDescribeConfigsRequest and describeConfigs."""
    body = request.body
    cls, module = response_types(request)
    include_synonyms = getattr(body, "include_synonyms", False)
    include_documentation = getattr(body, "include_documentation", False)
    results, denied = [], []
    for resource in body.resources:
        refused = _refused_by_acls(state, request, resource, auth_helper.DESCRIBE_CONFIGS)
        if refused is not None:
            denied.append(module.DescribeConfigsResult(error_code=refused.code, error_message=refused.message,
                                                       resource_type=resource.resource_type,
                                                       resource_name=resource.resource_name, configs=()))
            continue
        try:
            entries = _describe_resource(state, resource)
            code, message = ErrorCode.none, None
        except Refused as r:
            entries, code, message = [], r.code, r.message
        keys = resource.configuration_keys
        if keys:            # null or empty: every config
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        configs = tuple(build(
            module.DescribeConfigsResourceResult, name=e.name, value=e.value, read_only=e.read_only,
            config_source=e.source, is_default=e.source == SOURCE_DEFAULT, is_sensitive=e.sensitive,
            synonyms=tuple(module.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms)
            if include_synonyms else (),
            config_type=e.config_type, documentation=e.documentation if include_documentation else None)
            for e in entries)
        results.append(module.DescribeConfigsResult(error_code=code, error_message=message,
                                                    resource_type=resource.resource_type,
                                                    resource_name=resource.resource_name, configs=configs))
    # ConfigHelper.handleDescribeConfigsRequest answers the authorized resources, then the refused
    # ones (authorizedConfigs ++ unauthorizedConfigs), each part in the request's order
    return cls(throttle_time=NO_THROTTLE, results=tuple(results + denied))


def _describe_resource(state: BrokerState, resource) -> list[ConfigEntry]:
    name = resource.resource_name
    if resource.resource_type == RESOURCE_TOPIC:
        problem = topic_name_error(name)
        if problem:
            raise Refused(ErrorCode.invalid_topic_exception, problem)
        if not state.datadir.has_topic(name):
            raise Refused(ErrorCode.unknown_topic_or_partition)
        return topic_config_entries(state, name)
    if resource.resource_type == RESOURCE_BROKER:
        if name == "":
            return broker_config_entries(state, per_broker=False)     # the cluster-wide dynamic defaults
        if _parse_broker_id(name) != state.node_id:
            raise Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected {state.node_id} or "
                                                     f"empty string, but received {name}")
        return broker_config_entries(state)
    if resource.resource_type == RESOURCE_GROUP:
        if not name:
            raise Refused(ErrorCode.invalid_request, "Group name must not be empty")
        return group_config_entries(state, name)
    raise _unsupported_resource(resource.resource_type)


def _preprocess_alter(state: BrokerState, resources, *, incremental: bool) -> dict[int, Refused]:
    """ConfigAdminManager.preprocess: index of a resource -> its refusal, for the resources the
    broker refuses before any change is considered."""
    refused: dict[int, Refused] = {}
    first: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if key in first:
            for j in (first[key], i):
                refused[j] = Refused(ErrorCode.invalid_request, "Each resource must appear at most once.")
        else:
            first[key] = i
    for i, r in enumerate(resources):
        if i in refused:
            continue
        try:
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
            nulls = [c.name for c in r.configs if c.value is None
                     and not (incremental and c.config_operation == OP_DELETE)]
            if nulls:
                raise Refused(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
            if incremental:
                for c in r.configs:
                    if c.config_operation not in _OP_NAMES:
                        raise Refused(ErrorCode.invalid_request, f"Unknown operations type {c.config_operation}")
            if r.resource_type == RESOURCE_BROKER:
                if r.resource_name != "" and _parse_broker_id(r.resource_name, "Node id") != state.node_id:
                    raise Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                                                             f"{state.node_id}, but received {r.resource_name}")
                # DynamicBrokerConfig.validateConfigs, on what the resource would hold (Kafka's
                # ConfigAdminManager.validateBrokerConfigChange)
                refusal = dynamic_name_refusal(_broker_layer_after(state, r, incremental),
                                               per_broker=r.resource_name != "")
                if refusal:
                    raise Refused(ErrorCode.invalid_request, refusal)
            elif r.resource_type == RESOURCE_GROUP:
                if not r.resource_name:
                    raise Refused(ErrorCode.invalid_request, "Group name must not be empty")
            elif r.resource_type != RESOURCE_TOPIC:
                raise _unsupported_resource(r.resource_type)
        except Refused as e:
            refused[i] = e
    return refused


def _check_topic_resource(name: str) -> None:
    """ControllerConfigurationValidator.validate for a TOPIC resource."""
    if name == "":
        raise Refused(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    problem = topic_name_error(name)
    if problem:
        raise Refused(ErrorCode.invalid_topic_exception, problem)


def _alter_topic(state: BrokerState, name: str, new: dict[str, str], validate_only: bool) -> None:
    """Validate the topic's new override set, then check that it exists, then (unless only
    validating) make it the topic's (ConfigurationControlManager.validateAlterConfig)."""
    validate_topic_configs(state, name, new)
    if not state.datadir.has_topic(name):
        raise Refused(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    if not validate_only:
        state.datadir.set_topic_configs(name, new)


def _incremental_overrides(current: dict[str, str], configs, kind_and_default=None) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource: the overrides after the ops.
    APPEND and SUBTRACT start from the override, else from Kafka's own default of the config
    (``kind_and_default(name)``: (kind, default text) of a name, topic configs' by default)."""
    if kind_and_default is None:
        kind_and_default = _topic_kind_and_default
    new = dict(current)
    for c in configs:
        if c.config_operation == OP_SET:
            new[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            new.pop(c.name, None)
        else:
            kind, default = kind_and_default(c.name)
            if kind != "list":
                raise Refused(ErrorCode.invalid_config, f"Can't {_OP_NAMES[c.config_operation]} to key "
                                                        f"{c.name} because its type is not LIST.")
            base = current.get(c.name)
            if base is None:
                base = default or ""
            parts = [p for p in base.split(",") if p]
            if c.config_operation == OP_APPEND:
                for value in c.value.split(","):
                    if value not in parts:
                        parts.append(value)
            else:
                for value in c.value.split(","):
                    if value in parts:
                        parts.remove(value)
            new[c.name] = ",".join(parts)
    return new


def _topic_kind_and_default(name: str) -> tuple[str | None, str | None]:
    d = TOPIC_CONFIGS.get(name)
    return (None, None) if d is None else (d.kind, kafka_string(d.kind, d.default))


def _broker_kind_and_default(name: str) -> tuple[str | None, str | None]:
    """A broker setting's type and Kafka's default (the topic config's, for a topic default)."""
    from ...storage.config_entries import _broker_default
    return broker_kind(name), _broker_default(name)


def _group_kind_and_default(name: str) -> tuple[str | None, str | None]:
    d = GROUP_CONFIGS.get(name)
    return (None, None) if d is None else (d.kind, d.default)


def _config_refusal(e: ConfigError) -> Refused:
    message = e.kafka_message if isinstance(e, ConfigValueError) and e.kafka_message else str(e)
    return Refused(ErrorCode.invalid_config, message)


def _broker_layer_after(state: BrokerState, r, incremental: bool, dyn: DynamicConfigs | None = None) -> dict[str, str]:
    """A BROKER resource's dynamic settings once ``r``'s changes are made (this node's, or the
    cluster-wide defaults for the empty name)."""
    dyn = dyn or DynamicConfigs.read(state.datadir.path)
    layer = dyn.cluster_default if r.resource_name == "" else dyn.broker
    if incremental:
        return _incremental_overrides(layer, r.configs, _broker_kind_and_default)
    return {c.name: c.value for c in r.configs}


def _alter_broker(state: BrokerState, r, incremental: bool, validate_only: bool) -> None:
    """A BROKER resource's dynamic settings (this node's, or the cluster-wide defaults for the
    empty name): changed, checked with the static ones as a whole, kept, then applied.

    What takes effect when (storage.dynamic_config.effect, and the log line says it for each
    name): topic defaults, the producer-state settings and the cleaner's backoff and buffers at
    once, everywhere they are read; a TLS listener's key and trust stores
    (``listener.name.<l>.ssl.keystore.*`` / ``ssl.truststore.*``) for its next connections; the
    settings compactlog reads when it starts (thread counts, a listener's other settings) at the
    next start; the Kafka settings of things compactlog does not have, and custom names, are kept
    and described, as Kafka keeps them. The whole new configuration, security included, is checked
    as the next start would check it, so that a change accepted now never stops the broker from
    starting."""
    dd = state.datadir
    dyn = DynamicConfigs.read(dd.path)
    per_broker = r.resource_name != ""
    layer = dyn.broker if per_broker else dyn.cluster_default
    new = _broker_layer_after(state, r, incremental, dyn)
    refusal = dynamic_name_refusal(new, per_broker=per_broker)     # the file may have changed since
    if refusal:
        raise Refused(ErrorCode.invalid_request, refusal)
    try:
        for name, raw in new.items():          # the types of names compactlog itself does not use
            kind = broker_kind(listener_base_name(name) or name)
            if kind is not None:
                ConfigDef(name, kind, None).parse(raw)
        layer.clear()
        layer.update(new)
        broker = dyn.broker_config(state.broker.static_props)
        broker.validate()
    except ConfigError as e:
        raise _config_refusal(e) from None
    stores = _check_listeners(state, broker, reload_files=per_broker)
    if validate_only:
        return
    dyn.write(dd.path)
    dd.reconfigure_broker(broker)
    if stores:
        state.security.apply_stores(stores)
    where = "cluster-wide default" if r.resource_name == "" else f"broker {state.node_id}"
    shown = {n: "[hidden]" if is_secret_setting(n) else v for n, v in new.items()}
    live_tls = {sec.name.lower() for sec in state.security.listeners.values() if sec.uses_tls} \
        if state.security is not None else set()
    later = sorted(n for n in new if effect(n, live_tls) == "next start")
    unused = sorted(n for n in new if effect(n, live_tls) == "never")
    state.logger.info(f"Dynamic {where} configs are now {shown or '{}'}"
                      + (f"; taking effect at the next start: {', '.join(later)}" if later else "")
                      + (f"; kept but not used by compactlog: {', '.join(unused)}" if unused else ""))


def _check_listeners(state: BrokerState, broker, *, reload_files: bool) -> dict:
    """The listener settings of ``broker`` (the configuration after the change) as the next start
    checks them, and the TLS listeners whose stores change now (``BrokerSecurity.store_changes``).
    Refused (INVALID_REQUEST "Invalid dynamic configuration", Kafka's words for a reconfiguration
    that fails) with the reason, its paths reduced to file names."""
    security = state.security
    if security is None:        # no listener (the handlers' unit tests)
        return {}
    current = state.broker.props
    moved = sorted(n for n in NOT_AT_RUN_TIME if broker.props.get(n) != current.get(n))
    if moved:
        raise Refused(ErrorCode.invalid_request,
                      f"Invalid dynamic configuration: {', '.join(moved)} cannot change while the broker runs "
                      f"(a Kafka broker in KRaft mode refuses to alter its registered listeners too); set "
                      f"{'them' if len(moved) > 1 else 'it'} in server.properties and restart")
    try:
        _start_check(security, broker.props)
    except ConfigError as e:
        try:
            _start_check(security, current)
        except ConfigError:
            # not this change's doing (a store file rewritten since the start no longer loads):
            # Kafka applies the change and logs the listener's failure; so does compactlog
            state.logger.warning(f"The listeners' settings no longer load as they are: {e}")
        else:
            raise Refused(ErrorCode.invalid_request,
                          f"Invalid dynamic configuration: {scrub(str(e), state.datadir.path)}") from None
    try:
        return security.store_changes(broker.props, reload_files=reload_files)
    except ConfigError as e:
        raise Refused(ErrorCode.invalid_request,
                      f"Invalid dynamic configuration: {scrub(str(e), state.datadir.path)}") from None


def _start_check(security, props: dict[str, str]) -> None:
    """The listeners built from ``props`` as the broker's start builds them (a ConfigError if one
    cannot be), without a warning."""
    type(security)(props, security.listeners.values(), security.credentials, quiet=True)


def _alter_group(state: BrokerState, r, incremental: bool, validate_only: bool) -> None:
    """A GROUP resource's configs (Kafka 4.0's GroupConfig): validated (``validate_group_configs``,
    on the group's whole config after the change) and kept; a group need not exist (Kafka's do
    not either)."""
    dd = state.datadir
    dyn = DynamicConfigs.read(dd.path)
    current = dyn.groups.get(r.resource_name, {})
    if incremental:
        new = _incremental_overrides(current, r.configs, _group_kind_and_default)
    else:
        new = {c.name: c.value for c in r.configs}
    try:
        validate_group_configs(new, state.broker)
    except ConfigError as e:
        raise _config_refusal(e) from None
    if validate_only:
        return
    if new:
        dyn.groups[r.resource_name] = new
    else:
        dyn.groups.pop(r.resource_name, None)
    dyn.write(dd.path)
    state.broker.dynamic_groups = {g: dict(c) for g, c in dyn.groups.items()}


def handle_incremental_alter_configs(state: BrokerState, request):
    """IncrementalAlterConfigs (44): ConfigAdminManager.preprocess, then
    ConfigurationControlManager.incrementalAlterConfigs."""
    return _alter_configs(state, request, incremental=True)


def handle_alter_configs(state: BrokerState, request):
    """AlterConfigs (33), the legacy API: the listed configs become the resource's complete set of
    overrides (ConfigurationControlManager.legacyAlterConfigResource)."""
    return _alter_configs(state, request, incremental=False)


def _alter_configs(state: BrokerState, request, *, incremental: bool):
    body = request.body
    cls, module = response_types(request)
    refused = _preprocess_alter(state, body.resources, incremental=incremental)
    what = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
    responses = []
    with state.metadata_lock:
        for i, r in enumerate(body.resources):
            error = refused.get(i)
            if error is None:
                error = _refused_by_acls(state, request, r, auth_helper.ALTER_CONFIGS)
            if error is None:
                try:
                    if r.resource_type == RESOURCE_TOPIC:
                        _check_topic_resource(r.resource_name)
                        if incremental:
                            new = _incremental_overrides(state.datadir.topic_overrides(r.resource_name),
                                                         r.configs)
                        else:
                            new = {c.name: c.value for c in r.configs}
                        _alter_topic(state, r.resource_name, new, body.validate_only)
                    elif r.resource_type == RESOURCE_BROKER:
                        _alter_broker(state, r, incremental, body.validate_only)
                    elif r.resource_type == RESOURCE_GROUP:
                        _alter_group(state, r, incremental, body.validate_only)
                except Refused as e:
                    error = e
                except (CompactlogError, OSError) as e:
                    state.logger.error(f"{what} on {r.resource_name} failed: {e}")
                    error = Refused(*admin_error(e, state.datadir.path))
            responses.append(module.AlterConfigsResourceResponse(
                error_code=error.code if error else ErrorCode.none, error_message=error.message if error else None,
                resource_type=r.resource_type, resource_name=r.resource_name))
    return cls(throttle_time=NO_THROTTLE, responses=tuple(responses))


# -- error responses and declarations -------------------------------------------------------------

def describe_configs_error(body, cls, code, message):
    r = nested(cls, "DescribeConfigsResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r, error_code=code, error_message=message, resource_type=res.resource_type,
              resource_name=res.resource_name, configs=()) for res in body.resources))


def alter_configs_error(body, cls, code, message):
    """AlterConfigs and IncrementalAlterConfigs answer alike."""
    r = nested(cls, "AlterConfigsResourceResponse")
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(
        build(r, error_code=code, error_message=message, resource_type=res.resource_type,
              resource_name=res.resource_name) for res in body.resources))


DESCRIBE_CONFIGS = ApiHandler(32, "DescribeConfigs", 1, 4, mode=THREAD, handler=handle_describe_configs,
                              error_response=describe_configs_error)
ALTER_CONFIGS = ApiHandler(33, "AlterConfigs", 0, 2, mode=THREAD, handler=handle_alter_configs,
                           error_response=alter_configs_error)
INCREMENTAL_ALTER_CONFIGS = ApiHandler(44, "IncrementalAlterConfigs", 0, 1, mode=THREAD,
                                       handler=handle_incremental_alter_configs,
                                       error_response=alter_configs_error)
