"""report.html: the class at a glance, for the instructor. One self-contained page: the CSP of the
feedback pages, no scripts, figures as inline SVG (numbers only, so no font is needed for them),
every text escaped. Reads the numbers `class_stats` computed; computes none of its own."""
import html
from urllib.parse import quote

from autograder.page_policy import CSP_META
from autograder.report import class_stats as st
from autograder.report.class_data import safe

STYLE = """
body{font-family:"Noto Sans CJK SC","WenQuanYi Micro Hei","Microsoft YaHei",sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:26px} h2{border-bottom:2px solid #ccc;padding-bottom:4px;margin-top:36px}
table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} .num{text-align:right;font-variant-numeric:tabular-nums}
.glance{background:#eef6ff;border:1px solid #9cc3ee;padding:8px 16px}
.figs{display:flex;flex-wrap:wrap;gap:16px} figure{margin:0;width:370px} figcaption{font-size:13px;color:#555}
pre{background:#f7f7f7;padding:6px;max-height:360px;overflow:auto;font-size:12px;white-space:pre-wrap}
.pair{display:flex;gap:8px} .pair>div{flex:1;min-width:0} .muted{color:#777;font-size:13px}
"""


MAX_PAIRS_SHOWN = 40  # side by side on the page; similarity.csv lists every pair


def esc(text):
    return html.escape(str(text), quote=True)


def pct(x):
    return "—" if x is None else f"{100 * x:.0f}%"


def num(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def histogram(values, top, width=360, height=150):
    """An SVG histogram of scores in [0, top] with the median (line) and the quartiles (band): a bar per
    point when the maximum is a small whole number, else ten equal bins."""
    if not values:
        return "<p class='muted'>（没有数据）</p>"
    discrete = 0 < top <= 30 and float(top).is_integer()
    bins = int(top) + 1 if discrete else 10
    pad, base = 28, height - 22
    bar_w = (width - 2 * pad) / bins
    counts = [0] * bins
    for v in values:
        i = int(round(v)) if discrete else int(v / top * bins) if top else 0
        counts[max(0, min(i, bins - 1))] += 1

    def x_of(v):
        if discrete:
            return pad + v * bar_w + bar_w / 2
        return pad + (v / top if top else 0) * (width - 2 * pad)

    peak = max(counts)
    med, q1, q3 = st.spread(values)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'font-family="sans-serif" font-size="10">',
             f'<rect x="{x_of(q1):.1f}" y="4" width="{max(x_of(q3) - x_of(q1), 1):.1f}" height="{base - 4}" fill="#ffe9b3"/>']
    for i, c in enumerate(counts):
        h = (base - 14) * c / peak if peak else 0
        x = pad + i * bar_w
        parts.append(f'<rect x="{x + 1:.1f}" y="{base - h:.1f}" width="{max(bar_w - 2, 1):.1f}" height="{h:.1f}" fill="#4a7fc1"/>')
        if c:
            parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{base - h - 2:.1f}" text-anchor="middle">{c}</text>')
    parts.append(f'<line x1="{x_of(med):.1f}" y1="4" x2="{x_of(med):.1f}" y2="{base}" stroke="#c0392b" stroke-width="2"/>')
    parts.append(f'<line x1="{pad}" y1="{base}" x2="{width - pad}" y2="{base}" stroke="#333"/>')
    for v in (0, top / 2, top):
        parts.append(f'<text x="{x_of(v):.1f}" y="{height - 8}" text-anchor="middle">{v:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def figure(values, top, caption):
    spread = st.spread(values)
    detail = "" if spread is None else f"中位数 {spread[0]:g}，四分位 {spread[1]:g}–{spread[2]:g}"
    return (f"<figure>{histogram(values, top)}<figcaption>{esc(caption)}（{len(values)} 人；{esc(detail)}；"
            "红线 = 中位数，黄带 = 四分位区间）</figcaption></figure>")


def student_link(data, student, notebook):
    link = data.feedback.get((student, notebook))
    name = esc(safe(student))
    if not link:
        return name
    return f'<a href="{esc(quote(link))}">{name}</a>'


def _glance(data, stats, comparison):
    graded = [s for s in stats if s.students]
    lines = []
    if graded:
        hardest = min(graded, key=lambda s: (s.difficulty if s.difficulty is not None else 2, s.grade_id))
        lines.append(f"最难的题：<b>{esc(hardest.grade_id)}</b>（{esc(hardest.notebook)}），平均得分率 {pct(hardest.difficulty)}，"
                     f"满分 {pct(hardest.full_share)}")
        leaky = max(graded, key=lambda s: (s.public_only_share or 0, s.grade_id))
        if leaky.public_only_share:
            lines.append(f"公开检查放过最多的题：<b>{esc(leaky.grade_id)}</b>：{pct(leaky.public_only_share)} 的学生通过了公开检查，"
                         "却在隐藏检查上失分")
    common = sorted(((m, s) for s in stats for m in s.mistakes), key=lambda ms: (-len(ms[0].students), ms[0].text))[:3]
    for m, s in common:
        who = "、".join(student_link(data, x, s.notebook) for x in m.students)
        lines.append(f"常见错误（{esc(s.grade_id)}，{len(m.students)} 人）：{esc(safe(m.text))} —— {who}")
    if comparison is not None:
        lines.append(f"看起来相似、待复核的答案：{len(comparison.pairs)} 对（不影响分数）")
    return "<div class='glance'><ul>" + "".join(f"<li>{x}</li>" for x in lines) + "</ul></div>"


def _overview(data):
    totals = [data.totals[s][3] for s in data.students if s in data.totals]
    submitted = sum(len(v) for v in data.submitted.values())
    figs = [figure(totals, data.max_total, f"总分（自动 + 人工 + 额外加分，满分 {data.max_total:g}）")]
    for name in data.notebooks:
        scores = list(st.notebook_scores(data, name).values())
        if scores:
            top = st.notebook_points(data, name)
            figs.append(figure(scores, top, f"{name} 的自动评分（满分 {top:g}）"))
    skipped = ""
    if data.skipped:
        folders = "、".join(f"<code>{esc(k)}</code>（{esc(v)}）" for k, v in sorted(data.skipped.items()))
        skipped = f"<p>没有评分的文件夹：{folders}</p>"
    return (f"<h2>1. 全班概况</h2><p>学生 {len(data.students)} 人，提交的笔记本共 {submitted} 本。</p>{skipped}"
            f"<div class='figs'>{''.join(figs)}</div>")


def _exercise_table(stats):
    head = ("<tr><th>笔记本</th><th>练习</th><th class=num>满分</th><th class=num>人数</th><th class=num>平均分</th>"
            "<th class=num>满分比例</th><th class=num>0 分比例</th><th class=num>难度（得分率）</th>"
            "<th class=num>区分度</th><th class=num>公开通过、隐藏失分</th></tr>")
    rows = "".join(
        f"<tr><td>{esc(s.notebook)}</td><td><code>{esc(s.grade_id)}</code></td><td class=num>{s.points:g}</td>"
        f"<td class=num>{s.students}</td><td class=num>{num(s.mean)}</td><td class=num>{pct(s.full_share)}</td>"
        f"<td class=num>{pct(s.zero_share)}</td><td class=num>{pct(s.difficulty)}</td>"
        f"<td class=num>{num(s.discrimination)}</td><td class=num>{pct(s.public_only_share)}</td></tr>"
        for s in stats if s.students)
    return ("<h2>2. 每道题</h2><p class='muted'>难度 = 平均分 / 满分（越低越难）；区分度 = 这道题的得分与该生其余自动评分的相关系数"
            "（校正的题–总相关；接近 0 或为负说明这道题没有区分出学得好的学生；少于 3 人或没有差异时为 —）；"
            "最后一列：通过了公开检查、却在隐藏检查上失分的比例（公开检查太弱，或者学生在凑公开检查）。</p>"
            f"<table>{head}{rows}</table>")


def _mistakes(data, stats):
    parts = ["<h2>3. 常见错误</h2><p class='muted'>每名学生的每道题只按评分时认出的错误计一次；点学号打开他的反馈页面。"
             f"“{st.UNRECOGNISED}”：失了分，但没有认出是哪个已知错误；“{st.UNANSWERED}”：答案单元格还是发布时的样子。</p>"]
    for s in stats:
        if not s.students or not (s.mistakes or s.unanswered or s.unrecognised):
            continue
        rows = []
        for m in s.mistakes:
            who = "、".join(student_link(data, x, s.notebook) for x in m.students)
            key = f"<code>{esc(m.key)}</code>" if m.key else ""
            rows.append(f"<tr><td>{esc(safe(m.text))}</td><td>{key}</td><td class=num>{len(m.students)}</td>"
                        f"<td class=num>{pct(len(m.students) / s.students)}</td><td>{who}</td></tr>")
        for label, who_list in ((st.UNRECOGNISED, s.unrecognised), (st.UNANSWERED, s.unanswered)):
            if who_list:
                who = "、".join(student_link(data, x, s.notebook) for x in who_list)
                rows.append(f"<tr><td><i>{label}</i></td><td></td><td class=num>{len(who_list)}</td>"
                            f"<td class=num>{pct(len(who_list) / s.students)}</td><td>{who}</td></tr>")
        parts.append(f"<h3><code>{esc(s.grade_id)}</code>（{esc(s.notebook)}，{s.students} 人提交）</h3>"
                     "<table><tr><th>错误</th><th>名字</th><th class=num>人数</th><th class=num>比例</th><th>学生</th></tr>"
                     + "".join(rows) + "</table>")
    return "".join(parts)


def _written(data):
    qs = st.written_answers(data)
    if not qs:
        return "<h2>4. §C 文字题</h2><p>没有提交的文字题。</p>"
    rows = []
    for q in qs:
        dist = "、".join(f"{score:g} 分 × {n}" for score, n in sorted(q.scores.items())) or "—"
        rows.append(f"<tr><td>{esc(q.notebook)}</td><td><code>{esc(q.grade_id)}</code></td><td class=num>{q.points:g}</td>"
                    f"<td class=num>{q.graded}</td><td class=num>{q.waiting}</td><td>{esc(dist)}</td></tr>")
    return ("<h2>4. §C 文字题</h2><p class='muted'>人工评分来自成绩库（formgrader 里打的分在重新生成报告后出现）。</p>"
            "<table><tr><th>笔记本</th><th>题目</th><th class=num>满分</th><th class=num>已评</th><th class=num>待评</th>"
            "<th>已评的分数分布</th></tr>" + "".join(rows) + "</table>")


def _notes(data):
    counts = st.note_counts(data)
    if not counts:
        return ("<h2>5. 提交说明</h2>"
                "<p>没有任何说明（没有被拒绝的文件、恢复的单元格或跳过的文件夹）。</p>")
    rows = "".join(f"<tr><td>{esc(text[:400])}</td><td class=num>{n}</td></tr>" for text, n in counts[:60])
    more = f"<p class='muted'>……还有 {len(counts) - 60} 种说明，见各人的反馈页面。</p>" if len(counts) > 60 else ""
    return ("<h2>5. 提交说明</h2>"
            "<p class='muted'>评分时写给学生的说明（被拒绝的文件、恢复的单元格、改了名的文件……），按出现的学生人数计。</p>"
            f"<table><tr><th>说明</th><th class=num>学生数</th></tr>{rows}</table>{more}")


def _by_reason(why_by_student):
    out = {}
    for student, why in why_by_student.items():
        out.setdefault(why, []).append(student)
    return out


def _similarity(data, comparison):
    if comparison is None:
        return "<h2>6. 看起来相似的答案</h2><p>没有比较。</p>"
    compared = "、".join(f"<code>{esc(g)}</code>（{n} 份" + (f"；另有 {len(comparison.left_out[g])} 份没有比较，见下"
                                                          if comparison.left_out.get(g) else "") + "）"
                        for g, n in comparison.compared.items()) or "无"
    skipped = "".join(f"<li><code>{esc(g)}</code>：{esc(why)}</li>" for g, why in comparison.skipped.items())
    parts = ["<h2>6. 看起来相似的答案（待复核）</h2>",
             f"<p>仅供复核，<b>不改变任何分数</b>。用 copydetect（MOSS 式的 token 指纹 winnowing，变量名统一替换后比较；"
             f"k = {comparison.k}，窗口 {comparison.win_size}）比较答案单元格，去掉了发布版自带的签名和说明；"
             f"阈值 {comparison.threshold:.2f}：两份答案各自至少这么大比例的代码在对方里；"
             f"或者一份答案至少 {comparison.contained:.0%} 的代码整段出现在另一份里（用注释、死代码或多余的单元格"
             f"把抄来的答案撑长，也藏不住）。比较了：{compared}。</p>"]
    if skipped:
        parts.append(f"<p>没有比较：</p><ul>{skipped}</ul>")
    left_out = "".join(f"<li><code>{esc(g)}</code>：{'、'.join(esc(safe(s)) for s in sorted(who))}（{esc(why)}）</li>"
                       for g, by in sorted(comparison.left_out.items()) for why, who in _by_reason(by).items())
    if left_out:
        parts.append(f"<p><b>没有比较的答案</b>（similarity.csv 里 kind 为 not_compared 的行）：</p><ul>{left_out}</ul>")
    if not comparison.pairs:
        parts.append("<p>没有超过阈值的一对。</p>")
    if len(comparison.pairs) > MAX_PAIRS_SHOWN:
        parts.append(f"<p>共 {len(comparison.pairs)} 对超过阈值，这里并排显示相似度最高的 {MAX_PAIRS_SHOWN} 对；"
                     "全部见 similarity.csv。</p>")
    for i, p in enumerate(comparison.pairs[:MAX_PAIRS_SHOWN], 1):
        kind = {"students": "两名学生", "contained": "一份答案几乎整段在另一份里"}.get(p.kind, "学生与可见代码")
        b = esc(safe(p.b))
        parts.append(f"<h3>{i}. <code>{esc(p.grade_id)}</code>：{esc(safe(p.a))} 与 {b}（{kind}，相似度 {p.score:.2f}）</h3>"
                     f"<details><summary>并排查看</summary><div class='pair'><div><b>{esc(safe(p.a))}</b>"
                     f"<pre>{esc(p.a_source[:6000])}</pre></div><div><b>{b}</b><pre>{esc(p.b_source[:6000])}</pre></div></div></details>")
    return "".join(parts)


def render(data, stats, comparison):
    body = "".join([
        "<h1>W1D1 全班评分报告</h1>",
        _glance(data, stats, comparison), _overview(data), _exercise_table(stats), _mistakes(data, stats),
        _written(data), _notes(data), _similarity(data, comparison),
        "<p class='muted'>这一页的每个数都来自成绩库和这次评分的判定记录；"
        "同样的数据见 exercise_stats.csv、diagnoses.csv、similarity.csv。</p>",
    ])
    return (f"<!DOCTYPE html><html lang=\"zh-CN\"><head><meta charset=\"utf-8\">{CSP_META}"
            f"<title>W1D1 全班评分报告</title><style>{STYLE}</style></head><body>{body}</body></html>")
