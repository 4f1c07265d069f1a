"""Markdown folders as chunk memories: chunking, stable keys, re-import, and files refused by name.

Every import here writes two chunks per transaction, as a large folder's import writes
many (``memories.services.batches``): what the chunks do to each other must come out
the same across transactions. ``tests/test_import_batches.py`` checks that nothing is
seen before the import publishes.
"""

import os
import random
import string

import pytest
from django.utils import timezone

from memories import selectors, services
from memories.models import AuditEvent, Memory, Revision, Tag
from memories.services import batches
from memories.services.markdown import MARKDOWN_CHUNK_MAX_CHARS, MARKDOWN_FILE_MAX_BYTES
from memoryproject.exceptions import InvalidInput, NotFound, TooLarge


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(batches, "STAGED_CHUNK", 2)
    monkeypatch.setattr(batches, "STAGED_CHUNK_RANGE", (2, 2))


@pytest.fixture
def notes(tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    return root


def write(root, relpath, text):
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run(root, **options):
    options.setdefault("namespace", "acme")
    options.setdefault("collection", "docs")
    return services.markdown_import(root=root, actor="tester", interface="cli", **options)


def chunk(relpath, number, collection="docs"):
    return selectors.memory_get(namespace="acme", key=f"md:{collection}:{relpath}#{number}")


def chunk_texts(relpath):
    """The texts of the file's chunks that are not forgotten, in chunk order."""
    keys = Memory.objects.filter(key__startswith=f"md:docs:{relpath}#", state="active").values_list("key", flat=True)
    numbers = sorted(int(key.rsplit("#", 1)[1]) for key in keys)
    return [chunk(relpath, number).content for number in numbers]


def rows() -> dict:
    return {model.__name__: model.objects.count() for model in (Memory, Revision, Tag, AuditEvent)}


def paragraph(label, length):
    """Words making exactly ``length`` characters, with no space at either end."""
    text = (f"{label} " + " ".join(f"w{n}" for n in range(length)))[:length]
    return text[:-1] + "x" if text.endswith(" ") else text


def test_paragraphs_are_packed_greedily_into_chunks_of_at_most_1800_characters(db, notes):
    paragraphs = [paragraph(f"P{n}", 198) for n in range(30)]
    write(notes, "long.md", "\n\n".join(paragraphs) + "\n")

    report = run(notes)

    # Nine paragraphs take 9 * 198 + 8 * 2 = 1798 characters; a tenth would not fit.
    assert report.created == 4
    assert chunk_texts("long.md") == ["\n\n".join(paragraphs[at : at + 9]) for at in range(0, 30, 9)]


def test_a_paragraph_over_the_limit_is_split_at_lines_and_a_line_at_words(db, notes):
    lines = [paragraph(f"L{n}", 99) for n in range(50)]
    words = [f"word{n}" for n in range(600)]
    unbroken = "x" + "".join(random.Random(7).choices(string.ascii_letters, k=3999))
    write(notes, "split.md", "\n".join(lines) + "\n\n" + " ".join(words) + "\n\n" + unbroken)

    run(notes)

    texts = chunk_texts("split.md")
    assert all(len(text) <= MARKDOWN_CHUNK_MAX_CHARS for text in texts)
    line_chunks = [text for text in texts if text.startswith("L")]
    assert [line for text in line_chunks for line in text.split("\n")] == lines
    word_chunks = [text for text in texts if text.startswith("word")]
    assert len(word_chunks) > 1
    assert " ".join(word_chunks).split() == words
    # A word longer than a chunk is cut where it must be.
    assert [len(text) for text in texts[-3:]] == [1800, 1800, 400]
    assert "".join(texts[-3:]) == unbroken


def test_a_fenced_code_block_that_fits_is_never_split(db, notes):
    intro = paragraph("Intro", 1000)
    code = "```python\n" + "\n\n".join(f"value_{n} = {n}  # {'.' * 40}" for n in range(20)) + "\n```"
    assert MARKDOWN_CHUNK_MAX_CHARS - len(intro) - 2 < len(code) <= MARKDOWN_CHUNK_MAX_CHARS
    write(notes, "code.md", f"{intro}\n\n{code}\n\nAfter the code.\n")

    run(notes)

    assert chunk_texts("code.md") == [intro, f"{code}\n\nAfter the code."]


def test_the_title_is_the_first_heading_outside_fenced_code(db, notes):
    write(
        notes,
        "guide.md",
        "```sh\n# not a title, a shell comment\n```\n\nIntro text.\n\n## Real title ##\n\nBody.\n\n# Second heading\n",
    )
    write(notes, "plain.md", "#hashtag is not a heading.\n")

    run(notes)

    assert chunk("guide.md", 1).title == "Real title"
    assert chunk("plain.md", 1).title == "plain"


def test_chunk_keys_are_stable_and_the_source_is_the_relative_path(db, notes):
    write(notes, "guide/intro.md", "# Intro\n\n" + paragraph("A", 1500) + "\n\n" + paragraph("B", 1500))
    write(notes, "readme.md", "Read me.")

    first = run(notes, tags=["Docs"])

    keys = sorted(Memory.objects.values_list("key", flat=True))
    assert keys == ["md:docs:guide/intro.md#1", "md:docs:guide/intro.md#2", "md:docs:readme.md#1"]
    record = chunk("guide/intro.md", 2)
    assert (record.source, record.title, record.tags, record.kind) == ("guide/intro.md", "Intro", ["Docs"], "note")
    assert first.created == 3
    assert sorted(Memory.objects.values_list("key", flat=True)) == keys


def test_reimporting_unchanged_files_is_a_no_op(db, notes):
    write(notes, "a.md", "# A\n\nOne.\n\nTwo.")
    write(notes, "sub/b.md", paragraph("B", 1700) + "\n\n" + paragraph("C", 1700))
    run(notes)
    before = Revision.objects.count()

    report = run(notes)

    assert report.as_dict() == {
        "created": 0,
        "revised": 0,
        "unchanged": 3,
        "duplicates": 0,
        "forgotten": 0,
        "skipped": 0,
    }
    assert Revision.objects.count() == before


def test_a_changed_chunk_gets_a_new_revision_and_the_others_stay(db, notes):
    first, second = paragraph("First", 1500), paragraph("Second", 1500)
    write(notes, "doc.md", f"{first}\n\n{second}")
    run(notes)

    write(notes, "doc.md", f"{first}\n\n{second} (edited)")
    report = run(notes)

    assert (report.revised, report.unchanged, report.created) == (1, 1, 0)
    changed = Memory.objects.get(key="md:docs:doc.md#2")
    assert [revision.content for revision in changed.revisions.order_by("known_at")] == [second, f"{second} (edited)"]
    assert Memory.objects.get(key="md:docs:doc.md#1").revisions.count() == 1


def test_a_shorter_file_forgets_its_surplus_chunks_and_a_deleted_file_all_of_them(db, notes):
    parts = [paragraph(f"Part{n}", 1500) for n in range(3)]
    write(notes, "doc.md", "\n\n".join(parts))
    gone = write(notes, "gone.md", "Soon deleted.")
    run(notes)
    before = timezone.now()  # the import's chunks count from its publication, before this

    write(notes, "doc.md", "\n\n".join(parts[:2]))
    gone.unlink()
    report = run(notes)

    assert (report.forgotten, report.unchanged) == (2, 2)
    for relpath, number in (("doc.md", 3), ("gone.md", 1)):
        with pytest.raises(NotFound):
            chunk(relpath, number)
    # What was known before the import is still answerable.
    past = selectors.memory_get(namespace="acme", key="md:docs:doc.md#3", as_of=before)
    assert past.content == parts[2]
    assert run(notes).forgotten == 0

    write(notes, "gone.md", "Soon deleted.")
    assert run(notes).revised == 1  # a file that comes back brings its chunk back
    assert chunk("gone.md", 1).content == "Soon deleted."


def test_removing_the_first_paragraph_moves_every_text_up_a_chunk(db, notes):
    parts = [paragraph(f"Part{n}", 1500) for n in range(4)]
    write(notes, "doc.md", "\n\n".join(parts))
    run(notes)

    write(notes, "doc.md", "\n\n".join(parts[1:]))
    report = run(notes)

    assert (report.revised, report.forgotten, report.duplicates) == (3, 1, 0)
    assert chunk_texts("doc.md") == parts[1:]


def test_a_renamed_file_gives_its_text_to_its_new_keys(db, notes):
    parts = [paragraph(f"Part{n}", 1500) for n in range(3)]
    old = write(notes, "old.md", "\n\n".join(parts))
    write(notes, "other.md", "Stays as it is.")
    run(notes)

    old.rename(notes / "new.md")
    report = run(notes)

    assert (report.created, report.forgotten, report.unchanged, report.duplicates) == (3, 3, 1, 0)
    assert chunk_texts("new.md") == parts
    assert chunk_texts("old.md") == []


def test_two_chunks_that_swap_texts_both_end_up_with_their_new_text(db, notes):
    first, second = paragraph("First", 1500), paragraph("Second", 1500)
    write(notes, "doc.md", f"{first}\n\n{second}")
    run(notes)

    write(notes, "doc.md", f"{second}\n\n{first}")
    report = run(notes)

    assert report.revised == 2
    assert chunk_texts("doc.md") == [second, first]
    assert run(notes).unchanged == 2


def test_a_paragraph_already_in_another_chunk_is_counted_as_a_duplicate(db, notes):
    write(notes, "a.md", "Shared paragraph.")
    write(notes, "b.md", "Shared paragraph.")

    report = run(notes)

    assert (report.created, report.duplicates) == (1, 1)
    assert run(notes).duplicates == 1
    assert Revision.objects.count() == 1


def test_hidden_files_hidden_folders_and_symlinks_are_skipped(db, notes, tmp_path):
    write(notes, "seen.md", "Seen.")
    write(notes, "other.txt", "Not Markdown.")
    write(notes, ".hidden.md", "Hidden file.")
    write(notes, ".git/inside.md", "Hidden folder.")
    outside = tmp_path / "outside"
    write(outside, "secret.md", "Outside the folder.")
    os.symlink(outside / "secret.md", notes / "link.md")
    os.symlink(outside, notes / "linked-folder")

    report = run(notes)

    assert report.created == 1
    assert list(Memory.objects.values_list("key", flat=True)) == ["md:docs:seen.md#1"]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"Text with a \x00 NUL.", "bad.md: contains a NUL byte"),
        (b"Caf\xe9 in Latin-1.", "bad.md: is not valid UTF-8 (byte 3)"),
        (b"x" * (MARKDOWN_FILE_MAX_BYTES + 1), f"bad.md: {MARKDOWN_FILE_MAX_BYTES + 1} bytes is over the limit"),
    ],
)
def test_a_bad_file_is_refused_by_name_and_nothing_is_written(db, notes, content, expected):
    write(notes, "good.md", "A good file.")
    (notes / "deeper").mkdir()
    (notes / "deeper" / "bad.md").write_bytes(content)
    before = rows()

    with pytest.raises(InvalidInput) as raised:
        run(notes)

    assert f"deeper/{expected}" in raised.value.message
    assert rows() == before


def test_a_dry_run_counts_and_writes_nothing(db, notes):
    write(notes, "a.md", "One.")
    report = run(notes, dry_run=True)
    assert report.created == 1
    assert rows() == {"Memory": 0, "Revision": 0, "Tag": 0, "AuditEvent": 0}


def test_bad_arguments_and_too_many_chunks_are_refused(db, notes, settings):
    write(notes, "a.md", "One.\n\n" + paragraph("Two", 1799) + "\n\n" + paragraph("Three", 1799))
    with pytest.raises(InvalidInput, match="collection: 'md:x' is not a collection name"):
        run(notes, collection="md:x")
    with pytest.raises(InvalidInput, match="root: .* is not a folder"):
        run(notes / "a.md")
    settings.MEMORY_MAX_IMPORT_ITEMS = 2
    with pytest.raises(TooLarge, match="3 chunks, over the limit of 2"):
        run(notes)
    assert rows()["Memory"] == 0


@pytest.mark.slow
def test_the_import_markdown_command_imports_reimports_and_refuses_bad_files(instance, tmp_path):
    root = tmp_path / "handbook"
    write(root, "intro.md", "# Welcome\n\nFirst day.\n\n")
    write(root, "ops/deploy.md", "# Deploys\n\nTuesdays only.")
    args = ("import_markdown", str(root), "--namespace", "acme", "--collection", "handbook", "--tag", "hb")

    done = instance.manage(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Imported: 2 created, 0 revised, 0 unchanged, 0 duplicates, 0 forgotten, 0 skipped."

    write(root, "ops/deploy.md", "# Deploys\n\nThursdays only.")
    checked = instance.manage(*args, "--dry-run")
    assert checked.stdout.startswith("Dry run, nothing written; would be: 0 created, 1 revised, 1 unchanged")
    again = instance.manage(*args)
    assert again.stdout.startswith("Imported: 0 created, 1 revised, 1 unchanged")
    got = instance.memory("get", "--namespace", "acme", "--key", "md:handbook:ops/deploy.md#1")
    assert (got["content"], got["title"], got["source"], got["tags"]) == (
        "# Deploys\n\nThursdays only.",
        "Deploys",
        "ops/deploy.md",
        ["hb"],
    )

    (root / "broken.md").write_bytes(b"\xff\xfe")
    refused = instance.manage(*args)
    assert refused.returncode == 1
    assert "broken.md: is not valid UTF-8" in refused.stderr
    missing = instance.manage(
        "import_markdown", str(tmp_path / "nowhere"), "--namespace", "acme", "--collection", "handbook"
    )
    assert missing.returncode == 1
    assert "is not a folder" in missing.stderr
