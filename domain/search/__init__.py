"""Search across conversations, in pure functions: the text of a message that is searched,
its form for the databases' full-text engines, the query's words and phrases, and the
snippet that shows a match (adapters/storage/search_*.py hold the engines' indexes)."""
