"""Initial archive schema: environments, plays, policy versions, projection cursor.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "environments",
        sa.Column("env_id", sa.String(), primary_key=True),
        sa.Column("skill", sa.String(), nullable=False),
        sa.Column("difficulty", sa.Float(), nullable=True),
        sa.Column("code", sa.String(), nullable=False),
        sa.Column("code_sha256", sa.String(), nullable=False),
        sa.Column("document_source", sa.String(), nullable=True),
        sa.Column("document_id", sa.String(), nullable=True),
        sa.Column("document_sha256", sa.String(), nullable=True),
        sa.Column("document_title", sa.String(), nullable=True),
        sa.Column("parents", sa.JSON(), nullable=False),
        sa.Column("repair_of", sa.String(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.String(), nullable=True),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("valid", sa.Boolean(), nullable=True),
        sa.Column("error_kind", sa.String(), nullable=True),
        sa.Column("failed_check", sa.String(), nullable=True),
        sa.Column("class_name", sa.String(), nullable=True),
        sa.Column("novel", sa.Boolean(), nullable=True),
        sa.Column("novelty", sa.Float(), nullable=True),
        sa.Column("nearest_env_id", sa.String(), nullable=True),
        sa.Column("hint", sa.String(), nullable=True),
        sa.Column("hint_policy_version", sa.String(), nullable=True),
        sa.Column("plays_plain", sa.Integer(), nullable=False),
        sa.Column("plays_hinted", sa.Integer(), nullable=False),
        sa.Column("win_rate_plain", sa.Float(), nullable=True),
        sa.Column("win_rate_hinted", sa.Float(), nullable=True),
        sa.Column("regret", sa.Float(), nullable=True),
        sa.Column("designer_reward", sa.Float(), nullable=True),
        sa.Column("agent_policy_version", sa.String(), nullable=True),
        sa.Column("proposed_at", sa.String(), nullable=True),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("first_offset", sa.Integer(), nullable=True),
        sa.Column("last_offset", sa.Integer(), nullable=True),
        sa.Column("sources", sa.JSON(), nullable=False),
    )
    op.create_table(
        "plays",
        sa.Column("event_id", sa.String(), primary_key=True),
        sa.Column("env_id", sa.String(), nullable=False),
        sa.Column("play_id", sa.String(), nullable=False),
        sa.Column("hinted", sa.Boolean(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.String(), nullable=False),
        sa.Column("episode_reward", sa.Float(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("terminated", sa.Boolean(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("step_timeout", sa.Boolean(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("occurred_at", sa.String(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("offset", sa.Integer(), nullable=False),
    )
    op.create_index("ix_plays_env_id", "plays", ["env_id"])
    op.create_table(
        "policy_versions",
        sa.Column("version", sa.String(), primary_key=True),
        sa.Column("parent_version", sa.String(), nullable=True),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uri", sa.String(), nullable=True),
        sa.Column("checkpoint_sha256", sa.String(), nullable=True),
        sa.Column("base_model", sa.String(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("event_id", sa.String(), nullable=False),
        sa.Column("occurred_at", sa.String(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("offset", sa.Integer(), nullable=False),
    )
    op.create_table(
        "projection_state",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("cursor", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.String(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("projection_state")
    op.drop_table("policy_versions")
    op.drop_index("ix_plays_env_id", table_name="plays")
    op.drop_table("plays")
    op.drop_table("environments")
