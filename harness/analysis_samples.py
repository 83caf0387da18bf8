"""Texts for comparing the two engines' analysis word by word (tests/contract/test_lexical_contract.py,
bench/lexical.py).

`SENTENCES`: a fixed sample per language, written for this (everyday and technical sentences,
plurals, verb forms, compounds, elisions, names with İ, long words), whose stem differences are
listed exactly in `KNOWN_STEM_DIFFERENCES`. `real_texts`: more text where the machine has it, the
two English relevance collections beside the repository (in a clone without them, this
repository's own English documentation: README.md and docs/) and, for the other languages, the
translated messages of the machine's gettext catalogs (/usr/share/locale); on those only the
pipeline before the stemmer is compared (their wording varies with the packages installed).
"""

from __future__ import annotations

import gettext
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
LOCALES = Path("/usr/share/locale")
# gettext catalog folders of each analysis language (Norwegian's are Bokmål's).
CATALOGS = {"da": ["da"], "de": ["de"], "es": ["es"], "fr": ["fr"], "it": ["it"], "nl": ["nl"], "no": ["nb", "no"],
            "pt": ["pt"], "ru": ["ru"], "sv": ["sv"], "tr": ["tr"]}

COMMON = ["The engine's cross-section at Mach 2.5, x-ray O'Brien's flows; naïve ÉCOLE 1960s 3D",
          "İstanbul, İzmir and DİYARBAKIR: İNGİLİZCE İçin",
          "неудовлетворительный результат; ΠΑΡΑΚΑΛΩ ΣΟΦΙΑ; Donaudampfschifffahrtsgesellschaftskapitänsmütze",
          "a" * 39 + " " + "b" * 40 + " " + "ж" * 20 + " " + "щ" * 39 + " " + "ю" * 40 + " 𝐀𝐁𝐂 " + "𝐀" * 20]

SENTENCES: dict[str, list[str]] = {
    "en": ["Boundary-layer transition on swept wings: what are the effects of suction?",
           "The university's organization of international libraries grew during the evening.",
           "Biologists and sociologists studied the emergency; technologists added lateral intervals.",
           "Running dogs were running faster than the runners who ran yesterday.",
           "Information retrieval systems index documents, journals and abstracts for librarians."],
    "simple": ["The running gear SKU-42x; Läufer LÄUFT İstanbul"],
    "da": ["Hestene løb over markerne, og børnene legede i haven hele dagen.",
           "Filen kunne ikke åbnes, fordi adgangskoden var forkert.",
           "Vi arbejder med succesfulde systemer og nye programmer."],
    "de": ["Die Häuser der Städte wurden größer; Straßenbahnen fuhren durch die Straßen.",
           "Das Paket wurde verwendet, aber der Parameter war unerwartet veraltet.",
           "Die Datei konnte nicht geöffnet werden, weil das System beendet wurde.",
           "Kinder spielten im Garten, während die Eltern Bücher lasen."],
    "es": ["Los caballos corrían por las montañas y los niños cantaban canciones.",
           "No se pudo abrir el archivo porque la contraseña era incorrecta.",
           "La iteración terminó con una reubicación de los datos."],
    "fr": ["Les chevaux de l'écurie galopaient vers les prés enneigés.",
           "Le fichier n'a pas pu être ouvert : le mot de passe est mauvais.",
           "Les Français, les Portugais et les Japonais voyageaient ensemble."],
    "it": ["Gli uomini dell'università lavoravano nei laboratori della città.",
           "Impossibile aprire il file perché la password non è corretta.",
           "I bambini giocavano nei giardini mentre le madri leggevano libri."],
    "nl": ["Paardenrennen op zondag; de kinderen speelden in de tuinen.",
           "De gebruiker heeft de gegevens niet gevonden omdat de naam onbekend was.",
           "Installeer het pakket en kopiëren de bestanden naar de nieuwe map."],
    "no": ["Hestene løp over jordene, og barna lekte i hagen hele dagen.",
           "Filen kunne ikke åpnes fordi passordet var feil.",
           "Serverne og tasterne ble byttet ut av etterkommerne."],
    "pt": ["Os cavalos corriam pelas montanhas e as crianças cantavam canções.",
           "Não foi possível abrir o arquivo porque a senha estava incorreta."],
    "ru": ["Хорошие книги лежали на столах, а дети читали их вечером.",
           "Не удалось открыть файл, потому что пароль был неправильным."],
    "sv": ["Hästarna sprang över fälten och barnen lekte i trädgården.",
           "Arkivet kunde inte öppnas eftersom paketet saknades i systemet.",
           "Resultatet var tillåtet enligt formatet."],
    "tr": ["İstanbul'da kitapları okudular ve çocuklar bahçede oynadı.",
           "Dosya açılamadı çünkü İşaret geçersizdi; İNGİLİZCE bilmiyorum.",
           "Öğrenciler üniversitede yeni dersler aldılar."],
}

# Words (as lowercased before stemming) that Lucene 9.12's stemmer and tantivy's stem differently
# in the texts above: {language: {word: (OpenSearch's stem, tantivy's stem)}}. tantivy 0.27 stems
# with the Snowball project's current algorithms, Lucene with an older copy (docs/opensearch.md);
# neither side is a bug of ours. The test requires exactly these, so an engine upgrade that
# changes any of them, or a new difference, shows up.
KNOWN_STEM_DIFFERENCES: dict[str, dict[str, tuple[str, str]]] = {
    "en": {"added": ("ad", "add"), "biologists": ("biologist", "biolog"), "emergency": ("emerg", "emergenc"),
           "evening": ("even", "evening"), "international": ("intern", "internat"),
           "intervals": ("interv", "interval"), "lateral": ("later", "lateral"), "organization": ("organ", "organiz"),
           "sociologists": ("sociologist", "sociolog"), "technologists": ("technologist", "technolog"),
           "university": ("univers", "universiti")},
    "de": {"beendet": ("beendet", "beend"), "geöffnet": ("geoffnet", "geoffn"), "paket": ("paket", "pak"),
           "parameter": ("paramet", "param"), "system": ("syst", "system"), "unerwartet": ("unerwartet", "unerwart"),
           "veraltet": ("veraltet", "veralt"), "verwendet": ("verwendet", "verwend")},
    "fr": {"mauvais": ("mauv", "mauvais")},
    # Lucene's Kraaij-Pohlmann stemmer (analysis.LUCENE_SNOWBALL) keeps diaereses, Snowball 3.0's Dutch drops them.
    "nl": {"kopiëren": ("kopiër", "kopieer"), "école": ("école", "écool")},
    "sv": {"arkivet": ("arkivet", "arkiv"), "formatet": ("formatet", "format"), "paketet": ("paketet", "paket"),
           "resultatet": ("resultatet", "resultat"), "systemet": ("systemet", "system"),
           "tillåtet": ("tillåtet", "tillåt")},
}


def _catalog(code: str) -> list[str]:
    out: dict[str, None] = {}
    for folder in CATALOGS.get(code, []):
        for mo in sorted((LOCALES / folder / "LC_MESSAGES").glob("*.mo")):
            try:
                with mo.open("rb") as f:
                    catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            out.update({v: None for k, v in catalog.items() if k and isinstance(v, str) and v})
    return list(out)


def _english() -> list[str]:
    out: list[str] = []
    for name in ("cranfield", "cisi"):
        path = SHARED_DATA / name / "corpus.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                d = json.loads(line)
                out += [d["title"], d["text"]]
    return out or _own_docs()


def _own_docs() -> list[str]:
    """The lines of README.md and docs/*.md: English prose (and some markup) any clone has."""
    out: list[str] = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        out += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if len(line.strip()) > 40]
    return out


def real_texts(code: str, limit: int) -> list[str]:
    """Up to `limit` texts of real prose in the language, spread over all there are."""
    texts = _english() if code in ("en", "simple") else _catalog(code)
    step = max(1, len(texts) // max(limit, 1))
    return texts[::step][:limit]
