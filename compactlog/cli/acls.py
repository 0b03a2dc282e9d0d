"""``acls``: kafka-acls.sh, through a broker (``--bootstrap-server``, ``--command-config``:
CreateAcls, DescribeAcls and DeleteAcls with confluent-kafka's AdminClient) or on a data dir.

Kafka's options, checks and output (``AclCommand``): exactly one of ``--add``, ``--remove``,
``--list``; resources ``--topic T``, ``--group G``, ``--transactional-id I`` (each repeatable, ``*``
for all) and ``--cluster``; ``--resource-pattern-type literal|prefixed`` (and ``any``/``match`` to
list or remove); ``--allow-principal``/``--deny-principal User:name`` with ``--allow-host`` /
``--deny-host`` (default ``*``) and ``--operation`` (default All; Kafka's names, any case);
``--producer``, ``--consumer``, ``--idempotent``; ``--principal`` to list one principal's ACLs;
``--force`` to remove without asking. The lines printed are Kafka's (``Adding ACLs for resource
`ResourcePattern(...)`:``, ``Current ACLs for resource ...``).

On a data dir the ACLs are the file the broker loads at start (``compactlog.acls.json``):
``--add`` and ``--remove`` are writers (they take the data-dir lock, so they are refused while a
broker runs there: go through it), ``--list`` only reads. The broker applies them only with
``authorizer.class.name`` set.
"""

from __future__ import annotations

import typer

from .apps import app
from .common import context


@app.command("acls")
def acls_cmd(ctx: typer.Context,
             add: bool = typer.Option(False, "--add", help="Add ACLs."),
             remove: bool = typer.Option(False, "--remove", help="Remove ACLs."),
             list_: bool = typer.Option(False, "--list", help="List ACLs (of the resources given, else all)."),
             topic: list[str] = typer.Option(None, "--topic", help="A topic ('*': every topic); repeatable."),
             group: list[str] = typer.Option(None, "--group", help="A consumer group ('*': every group); repeatable."),
             transactional_id: list[str] = typer.Option(None, "--transactional-id",
                                                        help="A transactional id ('*': every one); repeatable."),
             cluster: bool = typer.Option(False, "--cluster", help="The cluster resource."),
             pattern_type: str = typer.Option("literal", "--resource-pattern-type",
                                              help="literal or prefixed; to list or remove also any (any pattern "
                                                   "type, this exact name) or match (every ACL that applies to the "
                                                   "name)."),
             allow_principal: list[str] = typer.Option(None, "--allow-principal",
                                                       help="A principal to allow, Type:name (User:alice, User:*)."),
             deny_principal: list[str] = typer.Option(None, "--deny-principal",
                                                      help="A principal to deny; DENY wins over ALLOW."),
             allow_host: list[str] = typer.Option(None, "--allow-host",
                                                  help="An IP address the allowed principals may come from "
                                                       "(default *)."),
             deny_host: list[str] = typer.Option(None, "--deny-host",
                                                 help="An IP address the denied principals are denied from "
                                                      "(default *)."),
             operation: list[str] = typer.Option(None, "--operation",
                                                 help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                                                      "DescribeConfigs, AlterConfigs, IdempotentWrite or All "
                                                      "(default); repeatable."),
             principal: list[str] = typer.Option(None, "--principal",
                                                 help="With --list: only this principal's ACLs; repeatable."),
             producer: bool = typer.Option(False, "--producer",
                                           help="Write, Describe and Create on the topics (and Write, Describe on "
                                                "the transactional ids)."),
             consumer: bool = typer.Option(False, "--consumer",
                                           help="Read and Describe on the topics, Read on the groups."),
             idempotent: bool = typer.Option(False, "--idempotent",
                                             help="With --producer: IdempotentWrite on the cluster."),
             force: bool = typer.Option(False, "--force", help="Remove without asking."),
             bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                  help="The broker to ask (HOST:PORT); default: the data dir."),
             command_config: str = typer.Option(None, "--command-config",
                                                help="Client properties for the broker (security.protocol, "
                                                     "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, "
                                                     "...).")):
    """Add, list and remove ACLs (kafka-acls.sh)."""
    from .acl_tool import run        # the ACL model imports the broker package (kio): not for --help
    run(context(ctx), add=add, remove=remove, list_=list_, topic=topic, group=group,
        transactional_id=transactional_id, cluster=cluster, pattern_type=pattern_type,
        allow_principal=allow_principal, deny_principal=deny_principal, allow_host=allow_host,
        deny_host=deny_host, operation=operation, principal=principal, producer=producer, consumer=consumer,
        idempotent=idempotent, force=force, bootstrap_server=bootstrap_server, command_config=command_config)
