"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 17:09:25.457858
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('scope', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    op.create_table('hosts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('booted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('in_inventory', sa.Boolean(), nullable=False),
    sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('physical_host', sa.String(length=255), nullable=True),
    sa.Column('region', sa.String(length=128), nullable=True),
    sa.Column('cluster', sa.String(length=128), nullable=True),
    sa.Column('sku', sa.String(length=128), nullable=True),
    sa.Column('cpu_model', sa.String(length=255), nullable=True),
    sa.Column('microcode', sa.String(length=64), nullable=True),
    sa.Column('bios_version', sa.String(length=128), nullable=True),
    sa.Column('bmc_version', sa.String(length=128), nullable=True),
    sa.Column('kernel_version', sa.String(length=128), nullable=True),
    sa.Column('os_image', sa.String(length=255), nullable=True),
    sa.Column('memory_gb', sa.Integer(), nullable=True),
    sa.Column('hypervisor', sa.String(length=128), nullable=True),
    sa.Column('gpu_driver', sa.String(length=128), nullable=True),
    sa.Column('labels', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hosts')),
    sa.UniqueConstraint('hostname', name=op.f('uq_hosts_hostname'))
    )
    with op.batch_alter_table('hosts', schema=None) as batch_op:
        batch_op.create_index('ix_hosts_kernel_version', ['kernel_version'], unique=False)
        batch_op.create_index('ix_hosts_physical_host', ['physical_host'], unique=False)

    op.create_table('signatures',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('algorithm_version', sa.Integer(), nullable=False),
    sa.Column('title', sa.String(length=512), nullable=False),
    sa.Column('kind', sa.String(length=64), nullable=False),
    sa.Column('function', sa.String(length=255), nullable=True),
    sa.Column('module', sa.String(length=128), nullable=True),
    sa.Column('frames', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('labels', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('owner', sa.String(length=255), nullable=True),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('resolution', sa.String(length=128), nullable=True),
    sa.Column('fix_versions', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('fixed_in_kernel', sa.String(length=128), nullable=True),
    sa.Column('capture_policy', sa.String(length=16), nullable=False),
    sa.Column('capture_dump_level', sa.Integer(), nullable=True),
    sa.Column('extra_full_captures', sa.Integer(), nullable=False),
    sa.Column('merged_into_id', sa.Integer(), nullable=True),
    sa.Column('notes', sa.Text(), nullable=True),
    sa.CheckConstraint("capture_policy IN ('auto', 'full', 'filtered', 'skip')", name=op.f('ck_signatures_capture_policy')),
    sa.CheckConstraint("status IN ('new', 'triaged', 'resolved', 'regressed', 'ignored')", name=op.f('ck_signatures_status')),
    sa.ForeignKeyConstraint(['merged_into_id'], ['signatures.id'], name=op.f('fk_signatures_merged_into_id_signatures')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_signatures')),
    sa.UniqueConstraint('fingerprint', name=op.f('uq_signatures_fingerprint'))
    )
    with op.batch_alter_table('signatures', schema=None) as batch_op:
        batch_op.create_index('ix_signatures_first_seen', ['first_seen'], unique=False)
        batch_op.create_index('ix_signatures_function', ['function'], unique=False)
        batch_op.create_index('ix_signatures_status', ['status'], unique=False)

    op.create_table('events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('host_id', sa.Integer(), nullable=False),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('boot_key', sa.String(length=160), nullable=False),
    sa.Column('boot_id', sa.String(length=128), nullable=True),
    sa.Column('signature_id', sa.Integer(), nullable=True),
    sa.Column('fingerprint', sa.String(length=64), nullable=True),
    sa.Column('algorithm_version', sa.Integer(), nullable=True),
    sa.Column('title', sa.String(length=512), nullable=True),
    sa.Column('crashed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('uptime_s', sa.BigInteger(), nullable=True),
    sa.Column('first_source', sa.String(length=16), nullable=False),
    sa.Column('sources', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('capture_action', sa.String(length=16), nullable=False),
    sa.Column('capture_reason', sa.String(length=255), nullable=False),
    sa.Column('capture_dump_level', sa.Integer(), nullable=True),
    sa.Column('regression', sa.String(length=32), nullable=True),
    sa.Column('physical_host', sa.String(length=255), nullable=True),
    sa.Column('region', sa.String(length=128), nullable=True),
    sa.Column('cluster', sa.String(length=128), nullable=True),
    sa.Column('sku', sa.String(length=128), nullable=True),
    sa.Column('cpu_model', sa.String(length=255), nullable=True),
    sa.Column('microcode', sa.String(length=64), nullable=True),
    sa.Column('bios_version', sa.String(length=128), nullable=True),
    sa.Column('bmc_version', sa.String(length=128), nullable=True),
    sa.Column('kernel_version', sa.String(length=128), nullable=True),
    sa.Column('os_image', sa.String(length=255), nullable=True),
    sa.Column('memory_gb', sa.Integer(), nullable=True),
    sa.Column('hypervisor', sa.String(length=128), nullable=True),
    sa.Column('gpu_driver', sa.String(length=128), nullable=True),
    sa.Column('labels', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.ForeignKeyConstraint(['host_id'], ['hosts.id'], name=op.f('fk_events_host_id_hosts')),
    sa.ForeignKeyConstraint(['signature_id'], ['signatures.id'], name=op.f('fk_events_signature_id_signatures')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events')),
    sa.UniqueConstraint('host_id', 'boot_key', name=op.f('uq_events_host_id_boot_key'))
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('ix_events_crashed_at', ['crashed_at'], unique=False)
        batch_op.create_index('ix_events_host_crashed', ['host_id', 'crashed_at'], unique=False)
        batch_op.create_index('ix_events_signature_crashed', ['signature_id', 'crashed_at'], unique=False)

    op.create_table('host_attribute_changes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('host_id', sa.Integer(), nullable=False),
    sa.Column('attribute', sa.String(length=64), nullable=False),
    sa.Column('old_value', sa.String(length=255), nullable=True),
    sa.Column('new_value', sa.String(length=255), nullable=True),
    sa.Column('changed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['host_id'], ['hosts.id'], name=op.f('fk_host_attribute_changes_host_id_hosts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_host_attribute_changes'))
    )
    with op.batch_alter_table('host_attribute_changes', schema=None) as batch_op:
        batch_op.create_index('ix_host_attribute_changes_attr', ['attribute', 'changed_at'], unique=False)
        batch_op.create_index('ix_host_attribute_changes_host', ['host_id', 'changed_at'], unique=False)

    op.create_table('jira_links',
    sa.Column('signature_id', sa.Integer(), nullable=False),
    sa.Column('issue_key', sa.String(length=64), nullable=False),
    sa.Column('issue_id', sa.String(length=64), nullable=True),
    sa.Column('url', sa.String(length=512), nullable=True),
    sa.Column('status_category', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_synced_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['signature_id'], ['signatures.id'], name=op.f('fk_jira_links_signature_id_signatures'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('signature_id', name=op.f('pk_jira_links')),
    sa.UniqueConstraint('issue_key', name=op.f('uq_jira_links_issue_key'))
    )
    op.create_table('outbox',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('topic', sa.String(length=64), nullable=False),
    sa.Column('signature_id', sa.Integer(), nullable=True),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('processed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['signature_id'], ['signatures.id'], name=op.f('fk_outbox_signature_id_signatures'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_outbox'))
    )
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.create_index('ix_outbox_pending', ['processed_at', 'next_attempt_at'], unique=False)

    op.create_table('signature_aliases',
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('signature_id', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=255), nullable=True),
    sa.ForeignKeyConstraint(['signature_id'], ['signatures.id'], name=op.f('fk_signature_aliases_signature_id_signatures'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('fingerprint', name=op.f('pk_signature_aliases'))
    )
    with op.batch_alter_table('signature_aliases', schema=None) as batch_op:
        batch_op.create_index('ix_signature_aliases_signature', ['signature_id'], unique=False)

    op.create_table('signature_counters',
    sa.Column('signature_id', sa.Integer(), nullable=False),
    sa.Column('shard', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('events', sa.Integer(), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['signature_id'], ['signatures.id'], name=op.f('fk_signature_counters_signature_id_signatures'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('signature_id', 'shard', name=op.f('pk_signature_counters'))
    )
    op.create_table('captures',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.Integer(), nullable=False),
    sa.Column('signature_id', sa.Integer(), nullable=True),
    sa.Column('method', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('dump_level', sa.Integer(), nullable=True),
    sa.Column('bytes', sa.BigInteger(), nullable=True),
    sa.Column('duration_s', sa.Float(), nullable=True),
    sa.Column('downtime_s', sa.Float(), nullable=True),
    sa.Column('target', sa.String(length=512), nullable=True),
    sa.Column('uri', sa.Text(), nullable=True),
    sa.Column('processing_state', sa.String(length=16), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['events.id'], name=op.f('fk_captures_event_id_events'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['signature_id'], ['signatures.id'], name=op.f('fk_captures_signature_id_signatures')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_captures'))
    )
    with op.batch_alter_table('captures', schema=None) as batch_op:
        batch_op.create_index('ix_captures_event', ['event_id'], unique=False)
        batch_op.create_index('ix_captures_signature_status', ['signature_id', 'status', 'created_at'], unique=False)

    op.create_table('reports',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('report_id', sa.String(length=128), nullable=False),
    sa.Column('event_id', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('payload_sha256', sa.String(length=64), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('console_log', sa.Text(), nullable=True),
    sa.Column('answer', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['events.id'], name=op.f('fk_reports_event_id_events'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_reports')),
    sa.UniqueConstraint('report_id', name=op.f('uq_reports_report_id'))
    )
    with op.batch_alter_table('reports', schema=None) as batch_op:
        batch_op.create_index('ix_reports_event', ['event_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('reports', schema=None) as batch_op:
        batch_op.drop_index('ix_reports_event')

    op.drop_table('reports')
    with op.batch_alter_table('captures', schema=None) as batch_op:
        batch_op.drop_index('ix_captures_signature_status')
        batch_op.drop_index('ix_captures_event')

    op.drop_table('captures')
    op.drop_table('signature_counters')
    with op.batch_alter_table('signature_aliases', schema=None) as batch_op:
        batch_op.drop_index('ix_signature_aliases_signature')

    op.drop_table('signature_aliases')
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_pending')

    op.drop_table('outbox')
    op.drop_table('jira_links')
    with op.batch_alter_table('host_attribute_changes', schema=None) as batch_op:
        batch_op.drop_index('ix_host_attribute_changes_host')
        batch_op.drop_index('ix_host_attribute_changes_attr')

    op.drop_table('host_attribute_changes')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('ix_events_signature_crashed')
        batch_op.drop_index('ix_events_host_crashed')
        batch_op.drop_index('ix_events_crashed_at')

    op.drop_table('events')
    with op.batch_alter_table('signatures', schema=None) as batch_op:
        batch_op.drop_index('ix_signatures_status')
        batch_op.drop_index('ix_signatures_function')
        batch_op.drop_index('ix_signatures_first_seen')

    op.drop_table('signatures')
    with op.batch_alter_table('hosts', schema=None) as batch_op:
        batch_op.drop_index('ix_hosts_physical_host')
        batch_op.drop_index('ix_hosts_kernel_version')

    op.drop_table('hosts')
    op.drop_table('api_tokens')
