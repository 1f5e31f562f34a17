"""Persistence for agent frameworks: the OpenAI Agents SDK session, LangChain chat history."""
