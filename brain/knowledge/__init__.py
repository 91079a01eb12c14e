"""Cultural knowledge: a teacher's playbooks made searchable, and tip cards grounded in them.

- `tokens`: words for retrieval in English, Hinglish and Devanagari, with cross-script sound keys.
- `chunking`: uploaded files to text (txt, md, docx, pdf) and text to chunks, as seed 004 says.
- `index`: one BM25 index (bm25s) per scenario, with a score threshold below which nothing is found.
- `cards`: tip cards made only of the retrieved chunks' own words; one generic card when none.
- `store`: uploaded playbook versions on disk, one active per scenario (Neo4j: `server/playbooks.py`).
- `retriever`: the LLM brain's cultural notes, retrieved from the scenario's knowledge for each turn.
- `library`: a scenario's pack knowledge plus its active playbook, indexed, and ingestion.

Nothing here calls a model or the network, and the same input always gives the same output.
"""
