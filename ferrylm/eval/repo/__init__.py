"""Pass@1 on the team's own code: held-out functions of its repositories, run against the
repositories' own tests (tasks.py finds them, splice.py splices and runs a model's bodies)."""

from .splice import score
from .tasks import RepoTaskError, RepoTasks, find_tasks, write_tasks

__all__ = ["RepoTaskError", "RepoTasks", "find_tasks", "score", "write_tasks"]
