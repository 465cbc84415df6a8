// The training text: a deterministic synthetic-grammar corpus (public domain by construction), and the
// character-level tokenizer over its fixed alphabet. Batches are drawn by a stateless hash of (seed, step,
// sequence index), so the global batch of a step is the same whatever the number of ranks and across resumes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid::trainer {

// Characters the corpus uses; token id = position in this string.
extern const char kAlphabet[];
int alphabetSize();

// Generates about `bytes` characters of text from `seed`.
std::string generateCorpus(size_t bytes, uint64_t seed);

// Token ids of `text`; returns false (naming the character) if it holds one outside the alphabet.
bool tokenize(const std::string& text, std::vector<int>* tokens, std::string* error);

// Input and target ids (ctx each, targets shifted by one) of sequence `index` of step `step`.
void sampleSequence(const std::vector<int>& tokens, int ctx, uint64_t seed, int64_t step, int64_t index, int* input,
                    int* target);

}  // namespace braid::trainer
