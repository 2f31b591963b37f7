"""Small tokenizer.json files built with the `tokenizers` library itself, one per
combination of normalizers, pre-tokenizers, model options, post-processors and
decoders that the real vocabularies do not cover. Trained at test time on the
corpus (deterministic), then used as references by the differential tests."""
import json

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

import tok_harness as h


def _training_text():
    text = list(h.corpus()) + h.random_strings(300, seed=7)
    return text * 3


def _train(tok, vocab_size, specials, alphabet=(), **kwargs):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                  initial_alphabet=list(alphabet), limit_alphabet=len(alphabet) or 160,
                                  show_progress=False, **kwargs)
    tok.train_from_iterator(_training_text(), trainer)


def _edit_model(tok, **fields):
    j = json.loads(tok.to_str())
    j["model"].update(fields)
    return Tokenizer.from_str(json.dumps(j))


def _add_byte_tokens(tok):
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    return Tokenizer.from_str(json.dumps(j))


def bytelevel_roberta():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    _train(tok, 800, ["<s>", "</s>", "<pad>", "<unk>"], pre_tokenizers.ByteLevel.alphabet())
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.add_tokens([AddedToken("cat", single_word=True, normalized=False),
                    AddedToken("Hello World", normalized=True),
                    AddedToken(" dog", rstrip=True, normalized=False)])
    return tok


def metaspace_first_byte_fallback():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                           normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                 split=True)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="\u2581", prepend_scheme="first"),
                                     decoders.ByteFallback(), decoders.Fuse()])
    _train(tok, 700, ["<unk>", "<s>", "</s>"])
    tok = _add_byte_tokens(_edit_model(tok, byte_fallback=True, fuse_unk=True))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")),
                                               ("</s>", tok.token_to_id("</s>"))])
    tok.add_special_tokens([AddedToken("[SPECIAL]", special=True, rstrip=True)])
    tok.add_tokens([AddedToken("world", normalized=True)])
    return tok


def metaspace_always_strip():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Strip(),
                                           normalizers.Replace(Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=False)
    tok.decoder = decoders.Metaspace(prepend_scheme="always")
    _train(tok, 600, ["<unk>"])
    return tok


def bert_like():
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    _train(tok, 900, ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"], continuing_subword_prefix="##")
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def suffix_and_punctuation():
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Prepend("~"),
                                           normalizers.Nmt()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation(behavior="contiguous"),
        pre_tokenizers.Digits(individual_digits=False)])
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    _train(tok, 700, ["<unk>"], end_of_word_suffix="</w>")
    return tok


def split_behaviors():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("``", '"'),
                                           normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), "merged_with_previous"),
        pre_tokenizers.Split("-", "merged_with_next"),
        pre_tokenizers.Split(Regex(r"[aeiou]+"), "contiguous"),
        pre_tokenizers.Split(Regex(r"[xyz]"), "merged_with_previous", invert=True),
        pre_tokenizers.Split(Regex(r"\s+"), "removed"),
        pre_tokenizers.CharDelimiterSplit("|"),
        pre_tokenizers.WhitespaceSplit()])
    # (Strip with both start and stop panics in tokenizers on a one-char token.)
    tok.decoder = decoders.Sequence([decoders.Replace("_", " "), decoders.Strip("e", 0, 1),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    _train(tok, 500, ["<unk>"])
    return tok


def digits_bytelevel_ignore_merges():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation(),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    _train(tok, 900, ["<|eot|>"], pre_tokenizers.ByteLevel.alphabet())
    tok = _edit_model(tok, ignore_merges=True)
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|eot|>", special_tokens=[("<|eot|>", tok.token_to_id("<|eot|>"))])
    tok.add_tokens([AddedToken("hello", normalized=True, special=False)])
    return tok


def wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    trainer = trainers.WordPieceTrainer(vocab_size=900, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                        limit_alphabet=160, show_progress=False)
    tok.train_from_iterator(_training_text(), trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def no_decoder():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    _train(tok, 400, ["<unk>", "<sep>"])
    return tok


BUILDERS = {
    "syn_bytelevel_roberta": bytelevel_roberta,
    "syn_metaspace_first_byte_fallback": metaspace_first_byte_fallback,
    "syn_metaspace_always_strip": metaspace_always_strip,
    "syn_bert_like": bert_like,
    "syn_suffix_and_punctuation": suffix_and_punctuation,
    "syn_split_behaviors": split_behaviors,
    "syn_digits_bytelevel_ignore_merges": digits_bytelevel_ignore_merges,
    "syn_wordpiece": wordpiece,
    "syn_no_decoder": no_decoder,
}


def build_all(folder):
    """Writes each synthetic tokenizer to folder/<name>/tokenizer.json; returns {name: path}."""
    out = {}
    for name, build in BUILDERS.items():
        d = folder / name
        d.mkdir(parents=True, exist_ok=True)
        build().save(str(d / "tokenizer.json"))
        out[name] = d
    return out
