"""instructor, unmodified, in its TOOLS, JSON and JSON_SCHEMA modes against Reame's chat route:
the same extraction in each. Prints, by mode, the object it made or the error it met, as JSON.
Usage: instructor_modes.py BASE_URL KEY MODEL"""

import json
import sys

import instructor
from openai import OpenAI
from pydantic import BaseModel

base_url, key, model = sys.argv[1:4]


class City(BaseModel):
    name: str
    country: str


# NOTE: the keys named in the question: JSON mode holds the answer to a JSON object only, and
# SmolLM2 writes {"city": {...}} when asked to "extract the city"
ASK = (
    "Turin is a city in the north of Italy, on the river Po.\n"
    "Give the name and the country of the city."
)
out = {}
for mode in ("TOOLS", "JSON", "JSON_SCHEMA"):
    client = instructor.from_openai(
        OpenAI(base_url=base_url + "/v1", api_key=key), mode=instructor.Mode[mode]
    )
    try:
        city = client.chat.completions.create(
            model=model,
            response_model=City,
            messages=[{"role": "user", "content": ASK}],
            temperature=0.0,
            max_tokens=120,
            max_retries=0,
        )
        out[mode] = {"object": city.model_dump()}
    except Exception as exc:  # NOTE: reported, for the test to show
        out[mode] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
print(json.dumps(out))
