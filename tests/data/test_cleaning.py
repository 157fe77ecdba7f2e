from data import cleaning


def test_normalize_text():
    assert cleaning.normalize_text("  a\tb \n c\u00a0d\u200b ") == "a b c d"
    assert cleaning.normalize_text("Mu\u0308nchen") == "München"  # NFC


def test_rejection_reasons():
    assert cleaning.rejection_reason("", "x") == "empty"
    assert cleaning.rejection_reason("OK", "OK") == "identical"
    assert cleaning.rejection_reason("a" * 31, "b" * 10) == "length_ratio"
    assert cleaning.rejection_reason("a" * 10, "b" * 31) == "length_ratio"
    assert cleaning.rejection_reason("a" * 30, "b" * 10) is None


def test_clean_pairs_counts_every_drop_and_deduplicates_across_calls():
    stats, seen = cleaning.CleaningStats(), set()
    first = list(cleaning.clean_pairs([("Hello  there", "Hallo da"), ("Same", "Same")], stats, seen))
    second = list(cleaning.clean_pairs([("Hello there", "Hallo  da"), ("", "leer")], stats, seen))
    assert first == [("Hello there", "Hallo da")] and second == []
    assert stats.as_dict() == {"raw": 4, "kept": 1, "dropped": {"duplicate": 1, "empty": 1, "identical": 1}}


def test_normalize_pairs_keeps_every_pair_and_reserves_it_against_training():
    stats, reserved = cleaning.CleaningStats(), set()
    evaluation = [("OK", "OK"), ("Go  home.", "Geh heim."), ("Go home.", "Geh heim."), ("x", "\u200b")]
    kept = list(cleaning.normalize_pairs(evaluation, stats, reserved))
    assert kept == [("OK", "OK"), ("Go home.", "Geh heim."), ("Go home.", "Geh heim.")]
    assert stats.as_dict() == {"raw": 4, "kept": 3, "dropped": {"empty": 1}}
    training_stats = cleaning.CleaningStats()
    training = [("Go home.", "Geh heim."), ("Come here.", "Komm her.")]
    assert list(cleaning.clean_pairs(training, training_stats, set(), reserved)) == [training[1]]
    assert training_stats.dropped == {"in_evaluation_files": 1}


def test_split_is_stable_and_near_three_percent():
    sentences = [f"Sentence number {i}." for i in range(20000)]
    splits = [cleaning.split_of(s) for s in sentences]
    assert splits == [cleaning.split_of(s) for s in sentences]
    for name in ("dev", "test"):
        assert 0.025 < splits.count(name) / len(splits) < 0.035
