"""Rounds of plays: the round of each play, every round's estimate (the win-rate series), and
per environment its rounds, replays and smoothed win rate.

An archive of schema 0002 holds one estimate per environment (RegretEstimated v1, the only
round): the upgrade writes it into ``estimates`` from the environment row (its source offset and
event id), so a migrated archive equals one rebuilt from the log.

Revision ID: 0003
Revises: 0002
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plays") as batch:
        batch.add_column(sa.Column("round", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("environments") as batch:
        batch.add_column(sa.Column("win_rate_smoothed", sa.Float(), nullable=True))
        batch.add_column(sa.Column("rounds", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("replays", sa.Integer(), nullable=False, server_default="0"))
    estimates = op.create_table(
        "estimates",
        sa.Column("event_id", sa.String(), primary_key=True),
        sa.Column("env_id", sa.String(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("replay", sa.Boolean(), nullable=False),
        sa.Column("designer_final", sa.Boolean(), nullable=False),
        sa.Column("win_rate_plain", sa.Float(), nullable=False),
        sa.Column("win_rate_hinted", sa.Float(), nullable=False),
        sa.Column("win_rate_smoothed", sa.Float(), nullable=True),
        sa.Column("regret", sa.Float(), nullable=False),
        sa.Column("designer_reward", sa.Float(), nullable=False),
        sa.Column("policy_version", sa.String(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("offset", sa.Integer(), nullable=False),
    )
    op.create_index("ix_estimates_env_id", "estimates", ["env_id"])
    conn = op.get_bind()
    env = sa.table(
        "environments", sa.column("env_id"), sa.column("sources"), sa.column("win_rate_plain"), sa.column("win_rate_hinted"),
        sa.column("regret"), sa.column("designer_reward"), sa.column("agent_policy_version"), sa.column("partition"),
        sa.column("win_rate_smoothed"), sa.column("rounds"),
    )
    rows = []
    for r in conn.execute(sa.select(env).where(env.c.win_rate_plain.is_not(None))).mappings():
        sources = r["sources"] if isinstance(r["sources"], dict) else json.loads(r["sources"] or "{}")
        src = sources.get("RegretEstimated")
        if not src:
            continue
        rows.append({
            "event_id": src[1], "env_id": r["env_id"], "round": 0, "replay": False, "designer_final": True,
            "win_rate_plain": r["win_rate_plain"], "win_rate_hinted": r["win_rate_hinted"] or 0.0,
            "win_rate_smoothed": r["win_rate_plain"], "regret": r["regret"] or 0.0,
            "designer_reward": r["designer_reward"] or 0.0, "policy_version": r["agent_policy_version"] or "",
            "partition": r["partition"], "offset": int(src[0]),
        })
    if rows:
        op.bulk_insert(estimates, rows)
        conn.execute(
            env.update().where(env.c.win_rate_plain.is_not(None)).values(win_rate_smoothed=env.c.win_rate_plain, rounds=1)
        )


def downgrade() -> None:
    op.drop_index("ix_estimates_env_id", table_name="estimates")
    op.drop_table("estimates")
    with op.batch_alter_table("environments") as batch:
        batch.drop_column("replays")
        batch.drop_column("rounds")
        batch.drop_column("win_rate_smoothed")
    with op.batch_alter_table("plays") as batch:
        batch.drop_column("round")
