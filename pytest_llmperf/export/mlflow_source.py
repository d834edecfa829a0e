"""Where a session's code came from, read from the CI job's variables, as MLflow's own
source tags (``mlflow.source.git.commit``, ``mlflow.source.git.branch``,
``mlflow.source.git.repoURL``: the MLflow UI shows them on the run's page) and a link back
to the job (``llmperf.ci.job_url``).

Read from the variables, never from ``git``: a CI checkout is often detached or shallow,
and the variables say what the job was started for (a pull request's head branch, not
``HEAD``). Outside CI nothing is tagged.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["source_tags"]

# (commit, branch, repository URL) variables of each CI, first found wins
_GITHUB = ("GITHUB_SHA", "GITHUB_HEAD_REF", "GITHUB_REF_NAME")
_VARIABLES: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("CI_COMMIT_SHA", ("CI_COMMIT_REF_NAME",), "CI_PROJECT_URL"),  # GitLab
    ("BUILDKITE_COMMIT", ("BUILDKITE_BRANCH",), "BUILDKITE_REPO"),
    ("CIRCLE_SHA1", ("CIRCLE_BRANCH",), "CIRCLE_REPOSITORY_URL"),
    ("GIT_COMMIT", ("GIT_BRANCH",), "GIT_URL"),  # Jenkins
)


def _github(environ: Mapping[str, str]) -> dict[str, str]:
    tags = {"mlflow.source.git.commit": environ.get("GITHUB_SHA", "")}
    # a pull request's run: GITHUB_HEAD_REF is its branch (GITHUB_REF_NAME reads "12/merge")
    tags["mlflow.source.git.branch"] = environ.get("GITHUB_HEAD_REF") or environ.get(
        "GITHUB_REF_NAME", ""
    )
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repository = environ.get("GITHUB_REPOSITORY", "")
    if repository:
        tags["mlflow.source.git.repoURL"] = f"{server}/{repository}"
        run_id = environ.get("GITHUB_RUN_ID", "")
        if run_id:
            tags["llmperf.ci.job_url"] = f"{server}/{repository}/actions/runs/{run_id}"
    return tags


def source_tags(environ: Mapping[str, str]) -> dict[str, str]:
    """The source tags the CI variables in ``environ`` give (empty outside CI)."""
    if environ.get(_GITHUB[0]):
        tags = _github(environ)
    else:
        tags = {}
        for commit, branches, repository in _VARIABLES:
            if environ.get(commit):
                tags["mlflow.source.git.commit"] = environ[commit]
                tags["mlflow.source.git.branch"] = next(
                    (environ[b] for b in branches if environ.get(b)), ""
                )
                tags["mlflow.source.git.repoURL"] = environ.get(repository or "", "")
                if environ.get("CI_JOB_URL"):  # GitLab
                    tags["llmperf.ci.job_url"] = environ["CI_JOB_URL"]
                break
    return {k: v for k, v in tags.items() if v}
