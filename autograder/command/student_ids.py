"""Student ids: a submission folder's name as nbgrader can take it, or why it cannot be one."""
import unicodedata
from collections import Counter

from autograder.notes import printable, quoted

ID_SYMBOLS = set("_-.@")


def student_id(name):
    """The student id of a folder name: its NFC form (a name typed on macOS arrives decomposed,
    `e` + U+0301 for `é`; both spellings are one student)."""
    return unicodedata.normalize("NFC", name)


def unsafe_id_reason(name):
    """Why a folder name cannot be a student id (None when it can): nbgrader reads ids as glob
    patterns and paths, so only letters (any script, with their combining marks), digits and
    `_ - . @` pass. The rule applies to the id the folder gets, `student_id(name)`."""
    name = student_id(name)
    if not name or name[0] in ".-":
        return "不能以 . 或 - 开头"
    bad, after_letter = set(), False
    for ch in name:
        mark = unicodedata.category(ch) in ("Mn", "Mc", "Me")
        if mark and after_letter:
            continue  # a vowel sign or accent of the letter before it (अनिल, a decomposed José)
        after_letter = ch.isalpha()
        if mark or not (ch.isalnum() or ch in ID_SYMBOLS):
            bad.add(ch)
    if bad:
        return "含有不允许的字符 " + " ".join(repr(ch) for ch in sorted(bad))
    return None


def safe_folders(folders, log):
    """(folders usable as student ids, {folder name: why it is skipped}); two folders with one id
    (the same name spelled composed and decomposed) are both skipped."""
    kept, skipped = [], {}
    ids = Counter(student_id(f.name) for f in folders)
    for folder in folders:
        why = unsafe_id_reason(folder.name)
        if why is None and ids[student_id(folder.name)] > 1:
            why = "另一个文件夹的名字写法不同（组合字符）但学号相同，无法区分"
        if why is None:
            kept.append(folder)
        else:
            skipped[printable(folder.name)] = why
            log(f"  [提交文件夹] 跳过 {quoted(folder.name)}：文件夹名不能作学号（{why}；只允许字母、数字和 _ - . @），"
                "没有评分，其他学生不受影响。")
    return kept, skipped
