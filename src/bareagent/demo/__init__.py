"""`bareagent demo`: a scripted, offline tour of the lead agent, teammates, jobs and subagents."""
