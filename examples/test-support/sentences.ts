/** Sentences and the label text_classification must give each (its lexicon is in packages/modelgen/src/sentiment.ts). */
export const SENTENCES: Readonly<Record<string, string>> = {
  'I love this wonderful movie': 'positive',
  'a terrible, boring waste of time': 'negative',
  'The film was at the theater on Sunday.': 'neutral',
  'Great acting, but the plot was a boring mess.': 'negative',
  'Amazing music and a delightful ending!': 'positive',
};
