"""Google's Gemini API (`generativelanguage.googleapis.com`): its door (`endpoint`), its
answers (`wire`) and its conversation (`conversation`). Read and recorded like the
others; not yet translated to or from another API."""
