"""The 18 tool schemas shown to the model: 6 base tools and 12 deferred ones."""

from __future__ import annotations

from bareagent.core.schema import ToolSchema, tool_schema

_STR = {"type": "string"}

BASE_TOOL_SCHEMAS: list[ToolSchema] = [
    tool_schema(
        "bash",
        "Run a shell command in the workspace (bash -lc; powershell on Windows). "
        "Returns stdout and stderr merged. The whole process tree is killed on timeout.",
        {
            "command": {"type": "string", "description": "The command line to run."},
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed (default 30).",
                "default": 30,
            },
        },
        ["command"],
    ),
    tool_schema(
        "read_file",
        "Read a UTF-8 text file from the workspace. Lines come back as `N: text`, numbered from 1.",
        {
            "file_path": {"type": "string", "description": "Workspace-relative path."},
            "offset": {
                "type": "integer",
                "description": "0-based line offset to start from (default 0).",
                "default": 0,
            },
            "limit": {"type": "integer", "description": "Maximum number of lines to return."},
        },
        ["file_path"],
    ),
    tool_schema(
        "write_file",
        "Write a whole text file in the workspace, creating parent directories. "
        "Overwrites an existing file.",
        {
            "file_path": {"type": "string", "description": "Workspace-relative path."},
            "content": {"type": "string", "description": "The complete new file content."},
        },
        ["file_path", "content"],
    ),
    tool_schema(
        "edit_file",
        "Replace the first occurrence of old_text with new_text in a workspace file.",
        {
            "file_path": {"type": "string", "description": "Workspace-relative path."},
            "old_text": {"type": "string", "description": "Exact text to replace."},
            "new_text": {"type": "string", "description": "Replacement text."},
        },
        ["file_path", "old_text", "new_text"],
    ),
    tool_schema(
        "glob",
        "Find files by glob pattern (recursive; `*.py` matches at any depth). Returns "
        "sorted workspace-relative paths. Skips .git, .venv, node_modules and caches.",
        {
            "pattern": {"type": "string", "description": "Glob pattern, e.g. `*.py`."},
            "path": {
                "type": "string",
                "description": "Directory or file to search (default `.`).",
                "default": ".",
            },
        },
        ["pattern"],
    ),
    tool_schema(
        "grep",
        "Search file contents with a Python regular expression. Returns `path:LINE:text` "
        "entries (at most 1000). Skips files over 1 MB and non-UTF-8 files.",
        {
            "pattern": {"type": "string", "description": "Python `re` pattern."},
            "path": {
                "type": "string",
                "description": "Directory or file to search (default `.`).",
                "default": ".",
            },
            "include": {
                "type": "string",
                "description": "Optional glob filter on file names, e.g. `*.py`.",
                "default": "",
            },
        },
        ["pattern"],
    ),
]

DEFERRED_TOOL_SCHEMAS: list[ToolSchema] = [
    tool_schema(
        "todo_write",
        "Add or update an item on this session's TODO list. action=add needs `task` "
        "(optional `priority`); action=update needs `task_id` and `status`.",
        {
            "action": {"type": "string", "enum": ["add", "update"]},
            "task": {"type": "string", "description": "Item text (for add)."},
            "priority": {
                "type": "string",
                "description": "Free-form priority label (default `normal`).",
            },
            "task_id": {"type": "string", "description": "Item id such as t1 (for update)."},
            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]},
        },
        ["action"],
    ),
    tool_schema("todo_read", "List this session's TODO items.", {}, []),
    {
        "name": "subagent",
        "description": (
            "Delegate a self-contained task to a subagent with a fresh context. It runs as "
            "its own process and returns its final answer (or starts in the background)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "Complete description of the task."},
                "agent_type": {
                    "type": "string",
                    "enum": ["general-purpose", "explore", "plan", "code-review"],
                    "description": "Kind of subagent (default general-purpose).",
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": "Return at once; the result arrives later as a notification.",
                    "default": False,
                },
            },
            "required": ["task"],
        },
    },
    {
        "name": "load_skill",
        "description": "Load the full instructions of a named skill (its SKILL.md).",
        "parameters": {
            "type": "object",
            "properties": {"skill_name": {"type": "string", "description": "Skill name."}},
            "required": ["skill_name"],
        },
    },
    tool_schema(
        "task_create",
        "Create a persistent task in the workspace task list (.tasks.json).",
        {
            "title": _STR,
            "description": {"type": "string", "default": ""},
            "depends_on": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Ids of tasks that must be done first.",
            },
        },
        ["title"],
    ),
    tool_schema(
        "task_list",
        "List persistent tasks, optionally only those with one status.",
        {"status": {"type": "string", "enum": ["pending", "in_progress", "done", "failed"]}},
        [],
    ),
    tool_schema("task_get", "Get one persistent task by id.", {"task_id": _STR}, ["task_id"]),
    tool_schema(
        "task_update",
        "Update a persistent task's status and/or title (at least one is required).",
        {
            "task_id": _STR,
            "status": {"type": "string", "enum": ["pending", "in_progress", "done", "failed"]},
            "title": _STR,
        },
        ["task_id"],
    ),
    tool_schema(
        "background_run",
        "Run a shell command as a supervised background job. Returns at once; the result "
        "is delivered as a notification on a later turn.",
        {
            "command": _STR,
            "timeout": {"type": "number", "default": 30},
            "task_id": {"type": "string", "description": "Optional job id."},
        },
        ["command"],
    ),
    tool_schema(
        "team_spawn",
        "Start a registered teammate as an autonomous background agent.",
        {"name": _STR},
        ["name"],
    ),
    tool_schema(
        "team_send",
        "Send a mailbox message to a teammate (or `main`).",
        {"to_agent": _STR, "content": _STR},
        ["to_agent", "content"],
    ),
    tool_schema("team_list", "List registered teammates and whether they run.", {}, []),
]
