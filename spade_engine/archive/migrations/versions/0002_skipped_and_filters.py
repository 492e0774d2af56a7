"""Record skipped events with the projection cursor; index the archive's search filters.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projection_state") as batch:
        batch.add_column(sa.Column("skipped", sa.JSON(), nullable=False, server_default="{}"))
    op.create_index("ix_environments_skill", "environments", ["skill"])
    op.create_index("ix_environments_verdict", "environments", ["verdict"])
    op.create_index("ix_environments_win_rate_plain", "environments", ["win_rate_plain"])


def downgrade() -> None:
    op.drop_index("ix_environments_win_rate_plain", table_name="environments")
    op.drop_index("ix_environments_verdict", table_name="environments")
    op.drop_index("ix_environments_skill", table_name="environments")
    with op.batch_alter_table("projection_state") as batch:
        batch.drop_column("skipped")
