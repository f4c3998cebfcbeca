"""A chat model behind an OpenAI-compatible `/v1/chat/completions` endpoint, asked for JSON of a schema.

An answer that is not JSON of the schema is sent back with the validation error and asked again (up to
`llm_retries` times); transport failures are retried with backoff. Tokens reported by the endpoint are
counted so a pass can keep to its budget; the model's output tokens are counted apart (a reflection's budget
is of output): the endpoint's `usage.completion_tokens`, or, when it reports none, an estimate of the answer's
text (`tokens.estimate_tokens`: about 4 characters a token).
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import LLMError
from rockmem_mcp.openai_http import EndpointFailed, EndpointRefused, endpoint_url, http_client, post_json
from rockmem_mcp.tokens import estimate_tokens

Schema = TypeVar("Schema", bound=BaseModel)
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class ChatLLM:
    def __init__(self, settings: Settings, backoff_s: float = 1.0) -> None:
        if not (settings.llm_endpoint and settings.llm_model):
            raise LLMError("no language model configured: set ROCKMEM_LLM_ENDPOINT and ROCKMEM_LLM_MODEL")
        self.url = endpoint_url(settings.llm_endpoint, "chat/completions")
        self.model = settings.llm_model
        self.settings = settings
        self.backoff_s = backoff_s
        self.tokens_used = 0
        self.output_tokens = 0
        self._client = http_client(settings.llm_timeout_s, settings.llm_api_key)

    def close(self) -> None:
        self._client.close()

    def complete_json(self, system: str, user: str, schema: type[Schema], max_tokens: int | None = None) -> Schema:
        """`max_tokens`: the most output tokens the answers may spend, retries included (asked of the endpoint
        per request as what is left)."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        problem = ""
        start = self.output_tokens
        for _ in range(self.settings.llm_retries + 1):
            left = None if max_tokens is None else max_tokens - (self.output_tokens - start)
            if left is not None and left <= 0:
                raise LLMError(f"the output budget ran out before a valid answer; last problem: {problem}")
            content = self._chat(messages, left)
            try:
                return schema.model_validate_json(unfenced(content))
            except ValidationError as exc:
                problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:5])
            messages += [
                {"role": "assistant", "content": content[:4000]},
                {
                    "role": "user",
                    "content": f"That is not valid ({problem}). Answer with JSON only, matching the schema.",
                },
            ]
        raise LLMError(f"{self.url} gave no valid answer in {self.settings.llm_retries + 1} tries; last: {problem}")

    def _chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> str:
        payload: dict[str, object] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        try:
            reply = post_json(
                self._client,
                self.url,
                payload,
                attempts=self.settings.llm_retries + 1,
                timeout=self.settings.llm_timeout_s,
                backoff_s=self.backoff_s,
            )
        except EndpointRefused as exc:
            raise LLMError(
                f"{self.url} refused the request: {exc} (check ROCKMEM_LLM_MODEL, ROCKMEM_LLM_API_KEY)"
            ) from None
        except EndpointFailed as exc:
            raise LLMError(f"{self.url} {exc}") from None
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
            self.tokens_used += usage["total_tokens"]
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(
                f"{self.url} answered without choices[0].message.content: {json.dumps(reply)[:200]}"
            ) from None
        if not isinstance(content, str):
            raise LLMError(f"{self.url} answered a message without text content")
        output = usage.get("completion_tokens") if isinstance(usage, dict) else None
        self.output_tokens += output if isinstance(output, int) and output >= 0 else estimate_tokens(content)
        return content


def language_model(settings: Settings) -> ChatLLM | None:
    """The server's language model when one is configured (the caller closes it), else None."""
    return ChatLLM(settings) if settings.llm_endpoint and settings.llm_model else None


def unfenced(text: str) -> str:
    """Models often wrap JSON in a ``` fence despite being asked not to."""
    match = _FENCE.match(text)
    return match.group(1) if match else text
