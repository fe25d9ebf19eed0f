"""The Content-Security-Policy every page the grader writes carries (feedback pages, the class report):
no script, no request out, nothing but inline styles and embedded images."""
CSP = ("default-src 'none'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "img-src data:; style-src 'unsafe-inline'; font-src data:")
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
