"""Stop words of the non-English analyzers (shared/adapters/analysis.py), one list per language.

English's is NLTK's list as bm25s ships it as "en_plus", plus single letters (ENGLISH below).

The lists are NLTK's (the Snowball project's lists), as bm25s 0.3.16 ships them (MIT), copied here so
that the analysis never changes with a dependency's release: a changed list would need a rebuild of
every lexical index (analysis.ANALYSIS_VERSION). Both engines get these exact words; neither
engine's built-in list is used (tantivy's and Lucene's differ). The analyzers add the 26 ASCII
letters to each list, as English's has them (shared/text/languages.py).
"""

from __future__ import annotations

# fmt: off
# English stop words: NLTK's list (Snowball's English list with contractions), as bm25s ships it
# as "en_plus". Longer than Lucene's 33: CISI's and Cranfield's prose queries ("what are the
# ... of ...") carry many function words that only add noise.
ENGLISH: tuple[str, ...] = (
    "a", "about", "above", "after", "again", "against", "ain", "all", "am", "an", "and", "any", "are", "aren",
    "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "couldn", "couldn't", "d", "did", "didn", "didn't", "do", "does", "doesn", "doesn't", "doing", "don",
    "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn", "hadn't", "has", "hasn",
    "hasn't", "have", "haven", "haven't", "having", "he", "her", "here", "hers", "herself", "him", "himself",
    "his", "how", "i", "if", "in", "into", "is", "isn", "isn't", "it", "it's", "its", "itself", "just", "ll",
    "m", "ma", "me", "mightn", "mightn't", "more", "most", "mustn", "mustn't", "my", "myself", "needn",
    "needn't", "no", "nor", "not", "now", "o", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
    "ourselves", "out", "over", "own", "re", "s", "same", "shan", "shan't", "she", "she's", "should",
    "should've", "shouldn", "shouldn't", "so", "some", "such", "t", "than", "that", "that'll", "the", "their",
    "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "ve", "very", "was", "wasn", "wasn't", "we", "were", "weren", "weren't", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "won't", "wouldn",
    "wouldn't", "y", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves",
    # single letters not in the list above
    "b", "c", "e", "f", "g", "h", "j", "k", "l", "n", "p", "q", "r", "u", "v", "w", "x", "z",
)



STOPWORDS: dict[str, tuple[str, ...]] = {
    "de": (  # German, 232 words
        "aber", "alle", "allem", "allen", "aller", "alles", "als", "also", "am", "an", "ander", "andere",
        "anderem", "anderen", "anderer", "anderes", "anderm", "andern", "anderr", "anders", "auch", "auf",
        "aus", "bei", "bin", "bis", "bist", "da", "damit", "dann", "das", "dass", "dasselbe", "dazu", "daß",
        "dein", "deine", "deinem", "deinen", "deiner", "deines", "dem", "demselben", "den", "denn", "denselben",
        "der", "derer", "derselbe", "derselben", "des", "desselben", "dessen", "dich", "die", "dies", "diese",
        "dieselbe", "dieselben", "diesem", "diesen", "dieser", "dieses", "dir", "doch", "dort", "du", "durch",
        "ein", "eine", "einem", "einen", "einer", "eines", "einig", "einige", "einigem", "einigen", "einiger",
        "einiges", "einmal", "er", "es", "etwas", "euch", "euer", "eure", "eurem", "euren", "eurer", "eures",
        "für", "gegen", "gewesen", "hab", "habe", "haben", "hat", "hatte", "hatten", "hier", "hin", "hinter",
        "ich", "ihm", "ihn", "ihnen", "ihr", "ihre", "ihrem", "ihren", "ihrer", "ihres", "im", "in", "indem",
        "ins", "ist", "jede", "jedem", "jeden", "jeder", "jedes", "jene", "jenem", "jenen", "jener", "jenes",
        "jetzt", "kann", "kein", "keine", "keinem", "keinen", "keiner", "keines", "können", "könnte", "machen",
        "man", "manche", "manchem", "manchen", "mancher", "manches", "mein", "meine", "meinem", "meinen",
        "meiner", "meines", "mich", "mir", "mit", "muss", "musste", "nach", "nicht", "nichts", "noch", "nun",
        "nur", "ob", "oder", "ohne", "sehr", "sein", "seine", "seinem", "seinen", "seiner", "seines", "selbst",
        "sich", "sie", "sind", "so", "solche", "solchem", "solchen", "solcher", "solches", "soll", "sollte",
        "sondern", "sonst", "um", "und", "uns", "unser", "unsere", "unserem", "unseren", "unseres", "unter",
        "viel", "vom", "von", "vor", "war", "waren", "warst", "was", "weg", "weil", "weiter", "welche",
        "welchem", "welchen", "welcher", "welches", "wenn", "werde", "werden", "wie", "wieder", "will", "wir",
        "wird", "wirst", "wo", "wollen", "wollte", "während", "würde", "würden", "zu", "zum", "zur", "zwar",
        "zwischen", "über"
    ),
    "nl": (  # Dutch, 101 words
        "aan", "al", "alles", "als", "altijd", "andere", "ben", "bij", "daar", "dan", "dat", "de", "der",
        "deze", "die", "dit", "doch", "doen", "door", "dus", "een", "eens", "en", "er", "ge", "geen", "geweest",
        "haar", "had", "heb", "hebben", "heeft", "hem", "het", "hier", "hij", "hoe", "hun", "iemand", "iets",
        "ik", "in", "is", "ja", "je", "kan", "kon", "kunnen", "maar", "me", "meer", "men", "met", "mij", "mijn",
        "moet", "na", "naar", "niet", "niets", "nog", "nu", "of", "om", "omdat", "onder", "ons", "ook", "op",
        "over", "reeds", "te", "tegen", "toch", "toen", "tot", "u", "uit", "uw", "van", "veel", "voor", "want",
        "waren", "was", "wat", "werd", "wezen", "wie", "wil", "worden", "wordt", "zal", "ze", "zelf", "zich",
        "zij", "zijn", "zo", "zonder", "zou"
    ),
    "fr": (  # French, 157 words
        "ai", "aie", "aient", "aies", "ait", "as", "au", "aura", "aurai", "auraient", "aurais", "aurait",
        "auras", "aurez", "auriez", "aurions", "aurons", "auront", "aux", "avaient", "avais", "avait", "avec",
        "avez", "aviez", "avions", "avons", "ayant", "ayante", "ayantes", "ayants", "ayez", "ayons", "c", "ce",
        "ces", "d", "dans", "de", "des", "du", "elle", "en", "es", "est", "et", "eu", "eue", "eues", "eurent",
        "eus", "eusse", "eussent", "eusses", "eussiez", "eussions", "eut", "eux", "eûmes", "eût", "eûtes",
        "furent", "fus", "fusse", "fussent", "fusses", "fussiez", "fussions", "fut", "fûmes", "fût", "fûtes",
        "il", "ils", "j", "je", "l", "la", "le", "les", "leur", "lui", "m", "ma", "mais", "me", "mes", "moi",
        "mon", "même", "n", "ne", "nos", "notre", "nous", "on", "ont", "ou", "par", "pas", "pour", "qu", "que",
        "qui", "s", "sa", "se", "sera", "serai", "seraient", "serais", "serait", "seras", "serez", "seriez",
        "serions", "serons", "seront", "ses", "soient", "sois", "soit", "sommes", "son", "sont", "soyez",
        "soyons", "suis", "sur", "t", "ta", "te", "tes", "toi", "ton", "tu", "un", "une", "vos", "votre",
        "vous", "y", "à", "étaient", "étais", "était", "étant", "étante", "étantes", "étants", "étiez",
        "étions", "été", "étée", "étées", "étés", "êtes"
    ),
    "es": (  # Spanish, 313 words
        "a", "al", "algo", "algunas", "algunos", "ante", "antes", "como", "con", "contra", "cual", "cuando",
        "de", "del", "desde", "donde", "durante", "e", "el", "ella", "ellas", "ellos", "en", "entre", "era",
        "erais", "eran", "eras", "eres", "es", "esa", "esas", "ese", "eso", "esos", "esta", "estaba",
        "estabais", "estaban", "estabas", "estad", "estada", "estadas", "estado", "estados", "estamos",
        "estando", "estar", "estaremos", "estará", "estarán", "estarás", "estaré", "estaréis", "estaría",
        "estaríais", "estaríamos", "estarían", "estarías", "estas", "este", "estemos", "esto", "estos", "estoy",
        "estuve", "estuviera", "estuvierais", "estuvieran", "estuvieras", "estuvieron", "estuviese",
        "estuvieseis", "estuviesen", "estuvieses", "estuvimos", "estuviste", "estuvisteis", "estuviéramos",
        "estuviésemos", "estuvo", "está", "estábamos", "estáis", "están", "estás", "esté", "estéis", "estén",
        "estés", "fue", "fuera", "fuerais", "fueran", "fueras", "fueron", "fuese", "fueseis", "fuesen",
        "fueses", "fui", "fuimos", "fuiste", "fuisteis", "fuéramos", "fuésemos", "ha", "habida", "habidas",
        "habido", "habidos", "habiendo", "habremos", "habrá", "habrán", "habrás", "habré", "habréis", "habría",
        "habríais", "habríamos", "habrían", "habrías", "habéis", "había", "habíais", "habíamos", "habían",
        "habías", "han", "has", "hasta", "hay", "haya", "hayamos", "hayan", "hayas", "hayáis", "he", "hemos",
        "hube", "hubiera", "hubierais", "hubieran", "hubieras", "hubieron", "hubiese", "hubieseis", "hubiesen",
        "hubieses", "hubimos", "hubiste", "hubisteis", "hubiéramos", "hubiésemos", "hubo", "la", "las", "le",
        "les", "lo", "los", "me", "mi", "mis", "mucho", "muchos", "muy", "más", "mí", "mía", "mías", "mío",
        "míos", "nada", "ni", "no", "nos", "nosotras", "nosotros", "nuestra", "nuestras", "nuestro", "nuestros",
        "o", "os", "otra", "otras", "otro", "otros", "para", "pero", "poco", "por", "porque", "que", "quien",
        "quienes", "qué", "se", "sea", "seamos", "sean", "seas", "sentid", "sentida", "sentidas", "sentido",
        "sentidos", "seremos", "será", "serán", "serás", "seré", "seréis", "sería", "seríais", "seríamos",
        "serían", "serías", "seáis", "siente", "sin", "sintiendo", "sobre", "sois", "somos", "son", "soy", "su",
        "sus", "suya", "suyas", "suyo", "suyos", "sí", "también", "tanto", "te", "tendremos", "tendrá",
        "tendrán", "tendrás", "tendré", "tendréis", "tendría", "tendríais", "tendríamos", "tendrían",
        "tendrías", "tened", "tenemos", "tenga", "tengamos", "tengan", "tengas", "tengo", "tengáis", "tenida",
        "tenidas", "tenido", "tenidos", "teniendo", "tenéis", "tenía", "teníais", "teníamos", "tenían",
        "tenías", "ti", "tiene", "tienen", "tienes", "todo", "todos", "tu", "tus", "tuve", "tuviera",
        "tuvierais", "tuvieran", "tuvieras", "tuvieron", "tuviese", "tuvieseis", "tuviesen", "tuvieses",
        "tuvimos", "tuviste", "tuvisteis", "tuviéramos", "tuviésemos", "tuvo", "tuya", "tuyas", "tuyo", "tuyos",
        "tú", "un", "una", "uno", "unos", "vosotras", "vosotros", "vuestra", "vuestras", "vuestro", "vuestros",
        "y", "ya", "yo", "él", "éramos"
    ),
    "pt": (  # Portuguese, 207 words
        "a", "ao", "aos", "aquela", "aquelas", "aquele", "aqueles", "aquilo", "as", "até", "com", "como", "da",
        "das", "de", "dela", "delas", "dele", "deles", "depois", "do", "dos", "e", "ela", "elas", "ele", "eles",
        "em", "entre", "era", "eram", "essa", "essas", "esse", "esses", "esta", "estamos", "estar", "estas",
        "estava", "estavam", "este", "esteja", "estejam", "estejamos", "estes", "esteve", "estive", "estivemos",
        "estiver", "estivera", "estiveram", "estiverem", "estivermos", "estivesse", "estivessem", "estivéramos",
        "estivéssemos", "estou", "está", "estávamos", "estão", "eu", "foi", "fomos", "for", "fora", "foram",
        "forem", "formos", "fosse", "fossem", "fui", "fôramos", "fôssemos", "haja", "hajam", "hajamos",
        "havemos", "haver", "hei", "houve", "houvemos", "houver", "houvera", "houveram", "houverei", "houverem",
        "houveremos", "houveria", "houveriam", "houvermos", "houverá", "houverão", "houveríamos", "houvesse",
        "houvessem", "houvéramos", "houvéssemos", "há", "hão", "isso", "isto", "já", "lhe", "lhes", "mais",
        "mas", "me", "mesmo", "meu", "meus", "minha", "minhas", "muito", "na", "nas", "nem", "no", "nos",
        "nossa", "nossas", "nosso", "nossos", "num", "numa", "não", "nós", "o", "os", "ou", "para", "pela",
        "pelas", "pelo", "pelos", "por", "qual", "quando", "que", "quem", "se", "seja", "sejam", "sejamos",
        "sem", "ser", "serei", "seremos", "seria", "seriam", "será", "serão", "seríamos", "seu", "seus",
        "somos", "sou", "sua", "suas", "são", "só", "também", "te", "tem", "temos", "tenha", "tenham",
        "tenhamos", "tenho", "terei", "teremos", "teria", "teriam", "terá", "terão", "teríamos", "teu", "teus",
        "teve", "tinha", "tinham", "tive", "tivemos", "tiver", "tivera", "tiveram", "tiverem", "tivermos",
        "tivesse", "tivessem", "tivéramos", "tivéssemos", "tu", "tua", "tuas", "tém", "tínhamos", "um", "uma",
        "você", "vocês", "vos", "à", "às", "é", "éramos"
    ),
    "it": (  # Italian, 279 words
        "a", "abbia", "abbiamo", "abbiano", "abbiate", "ad", "agl", "agli", "ai", "al", "all", "alla", "alle",
        "allo", "anche", "avemmo", "avendo", "avesse", "avessero", "avessi", "avessimo", "aveste", "avesti",
        "avete", "aveva", "avevamo", "avevano", "avevate", "avevi", "avevo", "avrai", "avranno", "avrebbe",
        "avrebbero", "avrei", "avremmo", "avremo", "avreste", "avresti", "avrete", "avrà", "avrò", "avuta",
        "avute", "avuti", "avuto", "c", "che", "chi", "ci", "coi", "col", "come", "con", "contro", "cui", "da",
        "dagl", "dagli", "dai", "dal", "dall", "dalla", "dalle", "dallo", "degl", "degli", "dei", "del", "dell",
        "della", "delle", "dello", "di", "dov", "dove", "e", "ebbe", "ebbero", "ebbi", "ed", "era", "erano",
        "eravamo", "eravate", "eri", "ero", "essendo", "faccia", "facciamo", "facciano", "facciate", "faccio",
        "facemmo", "facendo", "facesse", "facessero", "facessi", "facessimo", "faceste", "facesti", "faceva",
        "facevamo", "facevano", "facevate", "facevi", "facevo", "fai", "fanno", "farai", "faranno", "farebbe",
        "farebbero", "farei", "faremmo", "faremo", "fareste", "faresti", "farete", "farà", "farò", "fece",
        "fecero", "feci", "fosse", "fossero", "fossi", "fossimo", "foste", "fosti", "fu", "fui", "fummo",
        "furono", "gli", "ha", "hai", "hanno", "ho", "i", "il", "in", "io", "l", "la", "le", "lei", "li", "lo",
        "loro", "lui", "ma", "mi", "mia", "mie", "miei", "mio", "ne", "negl", "negli", "nei", "nel", "nell",
        "nella", "nelle", "nello", "noi", "non", "nostra", "nostre", "nostri", "nostro", "o", "per", "perché",
        "più", "quale", "quanta", "quante", "quanti", "quanto", "quella", "quelle", "quelli", "quello",
        "questa", "queste", "questi", "questo", "sarai", "saranno", "sarebbe", "sarebbero", "sarei", "saremmo",
        "saremo", "sareste", "saresti", "sarete", "sarà", "sarò", "se", "sei", "si", "sia", "siamo", "siano",
        "siate", "siete", "sono", "sta", "stai", "stando", "stanno", "starai", "staranno", "starebbe",
        "starebbero", "starei", "staremmo", "staremo", "stareste", "staresti", "starete", "starà", "starò",
        "stava", "stavamo", "stavano", "stavate", "stavi", "stavo", "stemmo", "stesse", "stessero", "stessi",
        "stessimo", "steste", "stesti", "stette", "stettero", "stetti", "stia", "stiamo", "stiano", "stiate",
        "sto", "su", "sua", "sue", "sugl", "sugli", "sui", "sul", "sull", "sulla", "sulle", "sullo", "suo",
        "suoi", "ti", "tra", "tu", "tua", "tue", "tuo", "tuoi", "tutti", "tutto", "un", "una", "uno", "vi",
        "voi", "vostra", "vostre", "vostri", "vostro", "è"
    ),
    "ru": (  # Russian, 151 words
        "а", "без", "более", "больше", "будет", "будто", "бы", "был", "была", "были", "было", "быть", "в",
        "вам", "вас", "вдруг", "ведь", "во", "вот", "впрочем", "все", "всегда", "всего", "всех", "всю", "вы",
        "где", "да", "даже", "два", "для", "до", "другой", "его", "ее", "ей", "ему", "если", "есть", "еще", "ж",
        "же", "за", "зачем", "здесь", "и", "из", "или", "им", "иногда", "их", "к", "как", "какая", "какой",
        "когда", "конечно", "кто", "куда", "ли", "лучше", "между", "меня", "мне", "много", "может", "можно",
        "мой", "моя", "мы", "на", "над", "надо", "наконец", "нас", "не", "него", "нее", "ней", "нельзя", "нет",
        "ни", "нибудь", "никогда", "ним", "них", "ничего", "но", "ну", "о", "об", "один", "он", "она", "они",
        "опять", "от", "перед", "по", "под", "после", "потом", "потому", "почти", "при", "про", "раз", "разве",
        "с", "сам", "свою", "себе", "себя", "сейчас", "со", "совсем", "так", "такой", "там", "тебя", "тем",
        "теперь", "то", "тогда", "того", "тоже", "только", "том", "тот", "три", "тут", "ты", "у", "уж", "уже",
        "хорошо", "хоть", "чего", "чем", "через", "что", "чтоб", "чтобы", "чуть", "эти", "этого", "этой",
        "этом", "этот", "эту", "я"
    ),
    "sv": (  # Swedish, 114 words
        "alla", "allt", "att", "av", "blev", "bli", "blir", "blivit", "de", "dem", "den", "denna", "deras",
        "dess", "dessa", "det", "detta", "dig", "din", "dina", "ditt", "du", "där", "då", "efter", "ej",
        "eller", "en", "er", "era", "ert", "ett", "från", "för", "ha", "hade", "han", "hans", "har", "henne",
        "hennes", "hon", "honom", "hur", "här", "i", "icke", "ingen", "inom", "inte", "jag", "ju", "kan",
        "kunde", "man", "med", "mellan", "men", "mig", "min", "mina", "mitt", "mot", "mycket", "ni", "nu",
        "när", "någon", "något", "några", "och", "om", "oss", "på", "samma", "sedan", "sig", "sin", "sina",
        "sitta", "själv", "skulle", "som", "så", "sådan", "sådana", "sådant", "till", "under", "upp", "ut",
        "utan", "vad", "var", "vara", "varför", "varit", "varje", "vars", "vart", "vem", "vi", "vid", "vilka",
        "vilkas", "vilken", "vilket", "vår", "våra", "vårt", "än", "är", "åt", "över"
    ),
    "no": (  # Norwegian, 172 words
        "alle", "at", "av", "bare", "begge", "ble", "blei", "bli", "blir", "blitt", "både", "båe", "da", "de",
        "deg", "dei", "deim", "deira", "deires", "dem", "den", "denne", "der", "dere", "deres", "det", "dette",
        "di", "din", "disse", "ditt", "du", "dykk", "dykkar", "då", "eg", "ein", "eit", "eitt", "eller",
        "elles", "en", "enn", "er", "et", "ett", "etter", "for", "fordi", "fra", "før", "ha", "hadde", "han",
        "hans", "har", "hennar", "henne", "hennes", "her", "hjå", "ho", "hoe", "honom", "hoss", "hossen", "hun",
        "hva", "hvem", "hver", "hvilke", "hvilken", "hvis", "hvor", "hvordan", "hvorfor", "i", "ikke", "ikkje",
        "ingen", "ingi", "inkje", "inn", "inni", "ja", "jeg", "kan", "kom", "korleis", "korso", "kun", "kunne",
        "kva", "kvar", "kvarhelst", "kven", "kvi", "kvifor", "man", "mange", "me", "med", "medan", "meg",
        "meget", "mellom", "men", "mi", "min", "mine", "mitt", "mot", "mykje", "ned", "no", "noe", "noen",
        "noka", "noko", "nokon", "nokor", "nokre", "nå", "når", "og", "også", "om", "opp", "oss", "over", "på",
        "samme", "seg", "selv", "si", "sia", "sidan", "siden", "sin", "sine", "sitt", "sjøl", "skal", "skulle",
        "slik", "so", "som", "somme", "somt", "så", "sånn", "til", "um", "upp", "ut", "uten", "var", "vart",
        "varte", "ved", "vere", "verte", "vi", "vil", "ville", "vore", "vors", "vort", "vår", "være", "vært",
        "å"
    ),
    "tr": (  # Turkish, 162 words
        "acaba", "ama", "ancak", "artık", "aslında", "ayrıca", "az", "bana", "bazen", "bazı", "bazıları",
        "belki", "ben", "benden", "beni", "benim", "beri", "bile", "biri", "birkaç", "birşey", "biz", "bize",
        "bizi", "bizim", "bu", "buna", "bunda", "bundan", "bunlar", "bunlara", "bunlardan", "bunları",
        "bunların", "bunu", "bunun", "burada", "böyle", "böylece", "da", "daha", "dahi", "de", "defa", "değil",
        "diye", "diğer", "dolayı", "dolayısıyla", "en", "eğer", "fakat", "gibi", "göre", "hakkında", "hala",
        "halde", "halen", "hangi", "hatta", "hem", "hemen", "henüz", "hep", "hepsi", "her", "herhangi",
        "herkes", "herkesin", "hiç", "hiçbir", "hiçbiri", "ile", "ilgili", "ise", "itibaren", "itibariyle",
        "için", "işte", "kadar", "karşın", "kendi", "kendilerine", "kendini", "kendisi", "kendisine",
        "kendisini", "kez", "ki", "kim", "kimden", "kime", "kimi", "kimler", "kimse", "lakin", "madem", "mi",
        "mu", "mü", "mı", "nasıl", "ne", "neden", "nedir", "nerde", "nerede", "nereden", "nereye", "niye",
        "niçin", "o", "ona", "ondan", "onlar", "onlara", "onlardan", "onları", "onların", "onu", "onun", "oysa",
        "pek", "rağmen", "sadece", "sanki", "sen", "senden", "seni", "senin", "siz", "sizden", "sizi", "sizin",
        "ta", "tarafından", "tüm", "tümü", "ve", "veya", "veyahut", "ya", "yani", "yerine", "yine", "yoksa",
        "zaten", "zira", "çok", "çünkü", "üzere", "şey", "şu", "şuna", "şunda", "şundan", "şunlar", "şunlara",
        "şunlardan", "şunu", "şunun", "şöyle"
    ),
    "da": (  # Danish, 122 words
        "alle", "alt", "at", "af", "blev", "blive", "bliver", "blevet", "da", "de", "dem", "den", "denne",
        "der", "deres", "det", "dette", "dig", "din", "dine", "dit", "du", "efter", "ej", "eller", "en", "end",
        "er", "et", "for", "fra", "før", "have", "han", "hans", "har", "hende", "hendes", "her", "hvad", "hvem",
        "hver", "hvilke", "hvilken", "hvilket", "hvor", "hvordan", "hvorfor", "i", "ikke", "ingen", "intet",
        "jeg", "kan", "kom", "kun", "kunne", "man", "med", "meget", "mellem", "men", "mig", "min", "mine",
        "mit", "mod", "må", "måske", "ned", "nogen", "noget", "nogle", "nu", "når", "og", "også", "om", "os",
        "over", "på", "samme", "selv", "sig", "sin", "sine", "sit", "skal", "skulle", "som", "så", "sådan",
        "sådanne", "sådant", "til", "under", "ud", "uden", "var", "være", "været", "ved", "vi", "vil", "ville",
        "vores", "vor", "vort", "dog", "jo", "ind", "op", "fordi", "hvornår", "ja", "hvis", "både", "selvom",
        "havde", "ham", "hun", "anden"
    ),
}
# fmt: on
