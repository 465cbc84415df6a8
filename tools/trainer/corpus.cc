#include "tools/trainer/corpus.h"

#include <cstring>

namespace braid::trainer {

const char kAlphabet[] = "\n .,abcdefghijklmnopqrstuvwxyz";

int alphabetSize() {
  return static_cast<int>(sizeof(kAlphabet) - 1);
}

namespace {

uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A tiny grammar: sentence = subject verb object [adverbial], with agreement-free word lists. The structure gives
// the model something learnable (word spelling, word order), so the loss falls well below the uniform log(V).
const char* const kDet[] = {"the", "a", "every", "some", "this", "that", "no", "one"};
const char* const kAdj[] = {"old", "small", "quiet", "bright", "green", "cold", "brave", "tired", "kind", "slow"};
const char* const kNoun[] = {"river",   "miller", "garden", "sailor", "lantern", "fox",   "harbor", "teacher",
                             "orchard", "wagon",  "bell",   "meadow", "baker",   "stone", "window", "shepherd"};
const char* const kVerb[] = {"watches", "carries", "finds",  "follows", "remembers", "builds",
                             "mends",   "greets",  "paints", "crosses", "keeps",     "hears"};
const char* const kPrep[] = {"near", "under", "beyond", "behind", "across", "beside"};
const char* const kAdv[] = {"slowly", "at dawn", "again", "in silence", "every morning", "with care"};

template <size_t N>
const char* pick(const char* const (&words)[N], uint64_t* s) {
  *s = mix(*s);
  return words[*s % N];
}

void nounPhrase(std::string* out, uint64_t* s) {
  out->append(pick(kDet, s));
  out->push_back(' ');
  *s = mix(*s);
  if (*s % 2 == 0) {
    out->append(pick(kAdj, s));
    out->push_back(' ');
  }
  out->append(pick(kNoun, s));
}

}  // namespace

std::string generateCorpus(size_t bytes, uint64_t seed) {
  std::string text;
  text.reserve(bytes + 128);
  uint64_t s = mix(seed);
  int sentences = 0;
  while (text.size() < bytes) {
    nounPhrase(&text, &s);
    text.push_back(' ');
    text.append(pick(kVerb, &s));
    text.push_back(' ');
    nounPhrase(&text, &s);
    s = mix(s);
    if (s % 3 == 0) {
      text.push_back(' ');
      text.append(pick(kPrep, &s));
      text.push_back(' ');
      nounPhrase(&text, &s);
    }
    s = mix(s);
    if (s % 4 == 0) {
      text.append(", ");
      text.append(pick(kAdv, &s));
    }
    text.append(".");
    text.push_back(++sentences % 6 == 0 ? '\n' : ' ');
  }
  return text;
}

bool tokenize(const std::string& text, std::vector<int>* tokens, std::string* error) {
  tokens->clear();
  tokens->reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char* at = text[i] == '\0' ? nullptr : std::strchr(kAlphabet, text[i]);
    if (at == nullptr) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      const std::string shown = c >= 32 && c < 127 ? std::string("'") + text[i] + "' " : std::string();
      *error = "character " + shown + "(byte " + std::to_string(c) + ") at offset " + std::to_string(i) +
               " is outside the alphabet (newline, space, '.', ',' and a-z)";

      return false;
    }
    tokens->push_back(static_cast<int>(at - kAlphabet));
  }
  return true;
}

void sampleSequence(const std::vector<int>& tokens, int ctx, uint64_t seed, int64_t step, int64_t index, int* input,
                    int* target) {
  const uint64_t span = tokens.size() - static_cast<uint64_t>(ctx) - 1;
  const uint64_t h =
      mix(mix(seed ^ 0xC0FFEEull) ^ mix(static_cast<uint64_t>(step) * 1000003ull + 7) ^ static_cast<uint64_t>(index));
  const size_t start = static_cast<size_t>(h % span);
  for (int t = 0; t < ctx; ++t) {
    input[t] = tokens[start + static_cast<size_t>(t)];
    target[t] = tokens[start + static_cast<size_t>(t) + 1];
  }
}

}  // namespace braid::trainer
